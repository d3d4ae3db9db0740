#include "cli_args.h"

#include <charconv>
#include <cmath>

namespace tumbler::cli {
namespace {

using std::chrono::milliseconds;

// 100 years: longer durations are refused (use "forever").
constexpr double kDurationMsMax = 100.0 * 365 * 24 * 3600 * 1000;

Status BadDuration(std::string_view text) {
  return Status(StatusCode::kInvalidArgument,
                "bad duration \"" + std::string(text) +
                    "\": use forms like 500ms, 10s, 1.5s, 2m, 1h, 0, or forever");
}

}  // namespace

Result<std::optional<milliseconds>> ParseDuration(std::string_view text) {
  if (text == "forever") return std::optional<milliseconds>();
  if (text == "0") return std::optional<milliseconds>(milliseconds(0));
  size_t digits_end = 0;
  bool seen_dot = false;
  bool seen_digit = false;
  while (digits_end < text.size()) {
    char c = text[digits_end];
    if (c >= '0' && c <= '9') {
      seen_digit = true;
    } else if (c == '.' && !seen_dot) {
      seen_dot = true;
    } else {
      break;
    }
    ++digits_end;
  }
  if (!seen_digit || digits_end > 20) return BadDuration(text);
  std::string_view number = text.substr(0, digits_end);
  std::string_view unit = text.substr(digits_end);
  double unit_ms;
  if (unit == "ms") {
    unit_ms = 1;
  } else if (unit == "s") {
    unit_ms = 1000;
  } else if (unit == "m") {
    unit_ms = 60'000;
  } else if (unit == "h") {
    unit_ms = 3'600'000;
  } else {
    return BadDuration(text);
  }
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size()) return BadDuration(text);
  double ms = std::round(value * unit_ms);
  if (!(ms >= 0) || ms > kDurationMsMax) return BadDuration(text);
  return std::optional<milliseconds>(milliseconds(static_cast<int64_t>(ms)));
}

std::string FormatDuration(std::optional<milliseconds> d) {
  if (!d) return "forever";
  int64_t ms = d->count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

Result<uint64_t> ParseUnsigned(std::string_view text, std::string_view what) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return Status(StatusCode::kInvalidArgument,
                  "bad " + std::string(what) + " \"" + std::string(text) + "\": expected a number");
  }
  return value;
}

Result<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                             const std::vector<FlagSpec>& spec, bool allow_dashes) {
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      if (!allow_dashes) return Status(StatusCode::kInvalidArgument, "unexpected \"--\"");
      out.after_dashes.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      return out;
    }
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      out.positional.push_back(arg);
      continue;
    }
    std::string name = arg;
    std::optional<std::string> inline_value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    const FlagSpec* flag = nullptr;
    for (const FlagSpec& f : spec) {
      if (f.name == name) flag = &f;
    }
    if (flag == nullptr) return Status(StatusCode::kInvalidArgument, "unknown option " + name);
    if (!flag->takes_value) {
      if (inline_value) {
        return Status(StatusCode::kInvalidArgument, name + " takes no value");
      }
      out.flags[name] = "";
      continue;
    }
    if (inline_value) {
      out.flags[name] = *inline_value;
      continue;
    }
    if (i + 1 >= args.size()) {
      return Status(StatusCode::kInvalidArgument, name + " needs a value");
    }
    out.flags[name] = args[++i];
  }
  return out;
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kNoSession:
    case StatusCode::kSessionLost: return kExitSessionLost;
    case StatusCode::kNotHeld:
    case StatusCode::kDeadlock:
    case StatusCode::kWrongMode: return kExitNotAcquired;
    case StatusCode::kInvalidArgument: return kExitUsage;
    default: return kExitServer;
  }
}

}  // namespace tumbler::cli
