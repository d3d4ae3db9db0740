#!/usr/bin/env bash
# Replaces one generated section of docs/benchmarks.md: everything between the
# lines `<!-- bench:NAME:begin -->` and `<!-- bench:NAME:end -->` becomes the
# contents of REPORT. Used by run.sh (results), cluster.sh and backends.sh.
#
#   bench/doc-section.sh NAME REPORT [DOC]     (DOC: docs/benchmarks.md)
#
# Exits 1 and changes nothing when DOC lacks either marker line.
set -euo pipefail
[[ $# -ge 2 && $# -le 3 ]] || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
NAME="$1"; REPORT="$2"
DOC="${3:-$(cd "$(dirname "$0")/.." && pwd)/docs/benchmarks.md}"
BEGIN="<!-- bench:$NAME:begin -->"
END="<!-- bench:$NAME:end -->"
if ! grep -qxF "$BEGIN" "$DOC" || ! grep -qxF "$END" "$DOC"; then
  echo "doc-section.sh: $DOC has no $BEGIN / $END lines; not written" >&2
  exit 1
fi
TMP_DOC="$(mktemp)"
trap 'rm -f "$TMP_DOC"' EXIT
awk -v begin="$BEGIN" -v end="$END" -v file="$REPORT" '
  $0 == begin { print; while ((getline line < file) > 0) print line; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }' "$DOC" >"$TMP_DOC"
cat "$TMP_DOC" >"$DOC"
