#include "reply_scanner.h"

#include <cstring>

namespace tumbler::bench {
namespace {

// Finds the CRLF-terminated line starting at `pos`; sets *line (without CRLF)
// and *next (position after CRLF).
ScanResult ReadLine(std::string_view in, size_t pos, std::string_view* line,
                    size_t* next) {
  const char* start = in.data() + pos;
  const size_t avail = in.size() - pos;
  const void* cr = std::memchr(start, '\r', avail);
  if (cr == nullptr) return ScanResult::kIncomplete;
  const size_t len = static_cast<const char*>(cr) - start;
  if (len + 1 >= avail) return ScanResult::kIncomplete;
  if (start[len + 1] != '\n') return ScanResult::kError;
  *line = std::string_view(start, len);
  *next = pos + len + 2;
  return ScanResult::kOk;
}

bool ParseInt(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  size_t i = 0;
  bool negative = false;
  if (s[0] == '-' || s[0] == '+') {
    negative = s[0] == '-';
    i = 1;
    if (s.size() == 1) return false;
  }
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
    if (v > static_cast<uint64_t>(INT64_MAX)) return false;
  }
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

// Scans one value at `pos`; fills *out when out != nullptr (top level and the
// first element of a top-level array). Sets *next past the value.
ScanResult ScanValue(std::string_view in, size_t pos, int depth, ReplyView* out,
                     size_t* next) {
  if (depth > kScanDepthMax) return ScanResult::kError;
  if (pos >= in.size()) return ScanResult::kIncomplete;
  const char type = in[pos];
  std::string_view line;
  size_t after = 0;
  ScanResult r = ReadLine(in, pos + 1, &line, &after);
  if (r != ScanResult::kOk) return r;
  ReplyView v;
  switch (type) {
    case '+':
      v.kind = ReplyView::Kind::kSimple;
      v.text = line;
      break;
    case '-':
    case '!':  // RESP3 blob error is not length-checked further here
      v.kind = ReplyView::Kind::kError;
      v.text = line;
      if (type == '!') {
        int64_t len = 0;
        if (!ParseInt(line, &len) || len < 0 || len > kScanBulkBytesMax) {
          return ScanResult::kError;
        }
        if (in.size() - after < static_cast<size_t>(len) + 2) return ScanResult::kIncomplete;
        v.text = in.substr(after, static_cast<size_t>(len));
        after += static_cast<size_t>(len) + 2;
      }
      break;
    case ':':
      v.kind = ReplyView::Kind::kInteger;
      if (!ParseInt(line, &v.integer)) return ScanResult::kError;
      break;
    case '#':
      v.kind = ReplyView::Kind::kInteger;
      if (line != "t" && line != "f") return ScanResult::kError;
      v.integer = line == "t" ? 1 : 0;
      break;
    case '_':
      v.kind = ReplyView::Kind::kNull;
      break;
    case ',':
    case '(':
      v.kind = ReplyView::Kind::kBulk;
      v.text = line;
      break;
    case '$':
    case '=': {
      int64_t len = 0;
      if (!ParseInt(line, &len) || len < -1 || len > kScanBulkBytesMax) {
        return ScanResult::kError;
      }
      if (len == -1) {
        v.kind = ReplyView::Kind::kNull;
        break;
      }
      if (in.size() - after < static_cast<size_t>(len) + 2) return ScanResult::kIncomplete;
      if (in[after + len] != '\r' || in[after + len + 1] != '\n') return ScanResult::kError;
      v.kind = ReplyView::Kind::kBulk;
      v.text = in.substr(after, static_cast<size_t>(len));
      after += static_cast<size_t>(len) + 2;
      break;
    }
    case '*':
    case '~':
    case '>':
    case '%': {
      int64_t n = 0;
      if (!ParseInt(line, &n) || n < -1 || n > kScanElementsMax) return ScanResult::kError;
      if (n == -1) {
        v.kind = ReplyView::Kind::kNull;
        break;
      }
      if (type == '%') n *= 2;
      v.kind = ReplyView::Kind::kArray;
      v.integer = n;
      for (int64_t i = 0; i < n; ++i) {
        ReplyView element;
        r = ScanValue(in, after, depth + 1, i == 0 ? &element : nullptr, &after);
        if (r != ScanResult::kOk) return r;
        if (i == 0 && element.kind == ReplyView::Kind::kInteger) {
          v.has_first_integer = true;
          v.first_integer = element.integer;
        }
      }
      break;
    }
    case '|': {  // RESP3 attribute: skip it and the value it annotates
      int64_t n = 0;
      if (!ParseInt(line, &n) || n < 0 || n > kScanElementsMax) return ScanResult::kError;
      for (int64_t i = 0; i < 2 * n; ++i) {
        r = ScanValue(in, after, depth + 1, nullptr, &after);
        if (r != ScanResult::kOk) return r;
      }
      return ScanValue(in, after, depth, out, next);
    }
    default:
      return ScanResult::kError;
  }
  if (out != nullptr) *out = v;
  *next = after;
  return ScanResult::kOk;
}

}  // namespace

ScanResult ScanReply(std::string_view in, ReplyView* out, size_t* consumed) {
  size_t next = 0;
  ReplyView v;
  const ScanResult r = ScanValue(in, 0, 0, &v, &next);
  if (r != ScanResult::kOk) return r;
  *out = v;
  *consumed = next;
  return ScanResult::kOk;
}

}  // namespace tumbler::bench
