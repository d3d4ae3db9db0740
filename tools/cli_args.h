// Argument handling for the `tumbler` CLI (docs/cli.md): durations, flags,
// exit codes. Pure functions, tested in cli_args_test.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tumbler/status.h"

namespace tumbler::cli {

// Exit codes (docs/cli.md "Exit codes"; also printed by `tumbler --help`).
enum ExitCode : int {
  kExitOk = 0,
  kExitNotAcquired = 1,  // lock not acquired (busy, wait ran out, deadlock), not held, CHECK false
  kExitUsage = 2,        // bad command line
  kExitServer = 3,       // server unreachable, timed out, or answered an error
  kExitSessionLost = 4,  // the session does not exist (any more)
  // `run` only, chosen not to collide with the command's own codes (as
  // timeout(1) and env(1) do):
  kExitRunSessionLost = 122,   // session lost while the command ran; it got SIGTERM
  kExitRunNotAcquired = 124,   // lock not acquired within --wait; command not run
  kExitRunFailed = 125,        // usage or server error before the command ran
  kExitRunCannotExec = 126,    // command found but not executable
  kExitRunNotFound = 127,      // command not found
};

// A duration as the CLI takes it: "forever", or a decimal number with a unit:
// "500ms", "10s", "1.5s", "2m", "1h"; "0" alone is zero. Returns nullopt for
// "forever". Errors: kInvalidArgument with the accepted forms.
Result<std::optional<std::chrono::milliseconds>> ParseDuration(std::string_view text);

// "forever", or the shortest exact form among "1h", "2m", "10s", "250ms".
std::string FormatDuration(std::optional<std::chrono::milliseconds> d);

// A non-negative integer (a session id, a count, a token). Errors:
// kInvalidArgument naming `what`.
Result<uint64_t> ParseUnsigned(std::string_view text, std::string_view what);

// What a subcommand accepts.
struct FlagSpec {
  std::string name;  // "--wait"
  bool takes_value;
};

struct ParsedArgs {
  std::map<std::string, std::string> flags;  // flag -> value ("" for switches)
  std::vector<std::string> positional;
  std::vector<std::string> after_dashes;  // everything after "--" (for run)
  bool has(const std::string& flag) const { return flags.count(flag) != 0; }
  std::string get(const std::string& flag, const std::string& fallback = "") const {
    auto it = flags.find(flag);
    return it == flags.end() ? fallback : it->second;
  }
};

// Parses `args` against `spec`: "--flag value" and "--flag=value" forms,
// switches, positionals, and "--" (when `allow_dashes`; the rest is
// after_dashes). A repeated flag keeps its last value. Errors:
// kInvalidArgument for an unknown flag, a missing value, a value given to a
// switch, or "--" where it is not allowed.
Result<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                             const std::vector<FlagSpec>& spec, bool allow_dashes);

// The process exit code for an error Status outside `run`: kNoSession and
// kSessionLost -> 4; kNotHeld, kDeadlock, kWrongMode -> 1; kInvalidArgument
// -> 2; anything else -> 3.
int ExitCodeFor(const Status& status);

}  // namespace tumbler::cli
