// A minimal, allocation-free reader of RESP2/RESP3 replies for the load
// generator's hot path.
//
// Why not src/protocol's ParseReply: it builds a Value tree (strings and
// vectors) for every reply; the bench reads hundreds of thousands of replies a
// second and needs only the top-level type, an integer and a view of a string.
// It is used for every backend alike, so the client cost is the same whatever
// the server. Nested elements are validated and skipped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tumbler::bench {

enum class ScanResult : uint8_t {
  kOk,          // one whole reply at the front of the input; *consumed set
  kIncomplete,  // need more bytes; nothing consumed
  kError,       // not RESP, or over a bound: the connection cannot go on
};

struct ReplyView {
  enum class Kind : uint8_t {
    kSimple,   // +OK
    kError,    // -ERR ...
    kInteger,  // :1 (also RESP3 boolean #t/#f as 1/0)
    kBulk,     // $3 abc (also RESP3 verbatim =, big number (, double ,)
    kNull,     // $-1, *-1, RESP3 _
    kArray,    // *n, RESP3 ~ set, > push, % map (counted as 2n elements)
  };
  Kind kind = Kind::kNull;
  int64_t integer = 0;    // kInteger: the value; kArray: element count
  std::string_view text;  // kSimple, kError, kBulk: the payload (views the input)
  // kArray whose first element is an integer (a LOCK grant [token, count]).
  bool has_first_integer = false;
  int64_t first_integer = 0;
};

// Bounds on what the scanner accepts.
inline constexpr int64_t kScanBulkBytesMax = 64 * 1024 * 1024;
inline constexpr int64_t kScanElementsMax = 1 << 20;
inline constexpr int kScanDepthMax = 8;

// Reads one reply at the front of `in`. On kOk, *out views `in` (valid while
// `in` is unchanged) and *consumed is its length.
ScanResult ScanReply(std::string_view in, ReplyView* out, size_t* consumed);

}  // namespace tumbler::bench
