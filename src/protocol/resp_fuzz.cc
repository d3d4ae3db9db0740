// libFuzzer target for the RESP codec (run by scripts/fuzz.sh). Beyond "does not
// crash under ASan/UBSan", it checks properties that tie the parsers together:
//   - a request or reply parsed as kOk consumed 1..size bytes and is within the
//     limits.h bounds, and every strict prefix of it is kIncomplete;
//   - parsed request -> AppendCommand -> ParseRequest gives the same arguments;
//   - parsed reply -> RESP3 bytes -> ParseReply gives the same value;
//   - arbitrary arguments (the input split at 0xff bytes) -> AppendCommand ->
//     ParseRequest is kOk exactly when they are within the request bounds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/limits.h"
#include "protocol/resp.h"

namespace tumbler::protocol {
namespace {

#define FUZZ_CHECK(cond)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                 \
      std::abort();                                                        \
    }                                                                      \
  } while (0)

using Strings = std::vector<std::string>;

Strings Copy(const std::vector<std::string_view>& args) { return Strings(args.begin(), args.end()); }

// Encodes args with AppendCommand and checks that they parse back.
void CheckCommandRoundTrip(const Strings& args) {
  const std::vector<std::string_view> views(args.begin(), args.end());
  std::string encoded;
  AppendCommand(&encoded, views);
  bool within_bounds = args.size() <= limits::kRequestArgsMax &&
                       encoded.size() <= limits::kRequestBytesMax;
  for (const std::string& arg : args) within_bounds &= arg.size() <= limits::kRequestArgBytesMax;

  std::vector<std::string_view> parsed;
  size_t consumed = 0;
  std::string error;
  const ParseResult result = ParseRequest(encoded, &parsed, &consumed, &error);
  if (!within_bounds) {
    FUZZ_CHECK(result == ParseResult::kError);
    return;
  }
  FUZZ_CHECK(result == ParseResult::kOk);
  FUZZ_CHECK(consumed == encoded.size());
  FUZZ_CHECK(Copy(parsed) == args);
}

void FuzzRequests(std::string_view in) {
  std::vector<std::string_view> args;
  std::string error;
  while (!in.empty()) {
    size_t consumed = 0;
    const ParseResult result = ParseRequest(in, &args, &consumed, &error);
    if (result != ParseResult::kOk) {
      FUZZ_CHECK(consumed == 0);
      FUZZ_CHECK(args.empty());
      return;
    }
    FUZZ_CHECK(consumed >= 1);
    FUZZ_CHECK(consumed <= in.size());
    FUZZ_CHECK(args.size() <= limits::kRequestArgsMax);
    for (std::string_view arg : args) FUZZ_CHECK(arg.size() <= limits::kRequestArgBytesMax);
    const Strings copy = Copy(args);  // views may point at the thread's scratch

    std::vector<std::string_view> prefix_args;
    size_t prefix_consumed = 0;
    FUZZ_CHECK(ParseRequest(in.substr(0, consumed - 1), &prefix_args, &prefix_consumed, &error) ==
               ParseResult::kIncomplete);
    CheckCommandRoundTrip(copy);
    in.remove_prefix(consumed);
  }
}

// Writes a Value back as RESP3 (attributes were dropped by the parser).
void Serialize(const Value& v, std::string* out) {
  using T = Value::Type;
  auto blob = [out](char type, std::string_view s) {
    *out += type;
    *out += std::to_string(s.size());
    *out += "\r\n";
    *out += s;
    *out += "\r\n";
  };
  auto line = [out](char type, std::string_view s) {
    *out += type;
    *out += s;
    *out += "\r\n";
  };
  auto aggregate = [&](char type, size_t n) {
    line(type, std::to_string(n));
    for (const Value& e : v.elements) Serialize(e, out);
  };
  switch (v.type) {
    case T::kSimple: line('+', v.str); break;
    case T::kError: blob('!', v.str); break;
    case T::kInteger: line(':', std::to_string(v.integer)); break;
    case T::kBulk: blob('$', v.str); break;
    case T::kNull: line('_', ""); break;
    case T::kArray: aggregate('*', v.elements.size()); break;
    case T::kMap: aggregate('%', v.elements.size() / 2); break;
    case T::kSet: aggregate('~', v.elements.size()); break;
    case T::kPush: aggregate('>', v.elements.size()); break;
    case T::kDouble: line(',', v.str); break;
    case T::kBoolean: line('#', v.integer ? "t" : "f"); break;
    case T::kBigNumber: line('(', v.str); break;
    case T::kVerbatim: blob('=', "txt:" + v.str); break;
  }
}

bool Equal(const Value& a, const Value& b) {
  if (a.type != b.type || a.str != b.str || a.integer != b.integer) return false;
  if (a.elements.size() != b.elements.size()) return false;
  for (size_t i = 0; i < a.elements.size(); ++i) {
    if (!Equal(a.elements[i], b.elements[i])) return false;
  }
  return true;
}

void FuzzReply(std::string_view in) {
  Value value;
  size_t consumed = 0;
  std::string error;
  const ParseResult result = ParseReply(in, &value, &consumed, &error);
  if (result != ParseResult::kOk) {
    FUZZ_CHECK(consumed == 0);
    FUZZ_CHECK(result == ParseResult::kIncomplete || !error.empty());
    return;
  }
  FUZZ_CHECK(consumed >= 1);
  FUZZ_CHECK(consumed <= in.size());
  if (value.type == Value::Type::kMap) FUZZ_CHECK(value.elements.size() % 2 == 0);

  Value prefix_value;
  size_t prefix_consumed = 0;
  FUZZ_CHECK(ParseReply(in.substr(0, consumed - 1), &prefix_value, &prefix_consumed, &error) ==
             ParseResult::kIncomplete);

  std::string again;
  Serialize(value, &again);
  Value reparsed;
  size_t reparsed_consumed = 0;
  FUZZ_CHECK(ParseReply(again, &reparsed, &reparsed_consumed, &error) == ParseResult::kOk);
  FUZZ_CHECK(reparsed_consumed == again.size());
  FUZZ_CHECK(Equal(value, reparsed));
  (void)value.ToStatus();
  (void)value.Find("id");
}

// Arbitrary binary arguments: the input split at 0xff bytes.
void FuzzAppendCommand(std::string_view in) {
  Strings args;
  size_t start = 0;
  for (size_t i = 0; i <= in.size(); ++i) {
    if (i == in.size() || static_cast<unsigned char>(in[i]) == 0xff) {
      args.emplace_back(in.substr(start, i - start));
      start = i + 1;
    }
  }
  if (in.empty()) args.clear();
  CheckCommandRoundTrip(args);
}

}  // namespace
}  // namespace tumbler::protocol

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  tumbler::protocol::FuzzRequests(in);
  tumbler::protocol::FuzzReply(in);
  tumbler::protocol::FuzzAppendCommand(in);
  return 0;
}
