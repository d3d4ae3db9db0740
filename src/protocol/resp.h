// RESP2 / RESP3 codec shared by the server and the client library.
// Wire format: https://redis.io/docs/reference/protocol-spec/ ; what tumbler
// accepts is in docs/protocol.md. Every length read off the wire is checked
// against limits.h before any memory is taken for it.
//
// Thread safety: the functions are reentrant; a ReplyWriter is used by one
// thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/limits.h"
#include "tumbler/status.h"

namespace tumbler::protocol {

enum class ParseResult : uint8_t {
  kOk,          // one whole message parsed; *consumed bytes were used
  kIncomplete,  // more bytes are needed; nothing consumed
  kError,       // malformed or over a bound; the connection cannot continue
};

// --- Requests (server side). -------------------------------------------------

// Parses one request at the front of `in`: a RESP array of bulk strings
// ("*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n") or an inline command ("PING hi\r\n",
// split on spaces, with Redis' quoting rules for "..." and '...'; "\n" alone
// ends a line too). Empty inline lines, "*0\r\n" and "*-1\r\n" are skipped:
// consumed, with *args left empty, result kOk.
//
// On kOk, *consumed is the request's size and *args holds its arguments. They
// view `in`, except an inline argument whose quotes or escapes had to be
// decoded, which views a thread-local buffer. So the views are valid while `in`
// is unchanged AND until the next ParseRequest call on the same thread: use (or
// copy) a request's arguments before parsing the next one.
// On kIncomplete and kError, *consumed is 0 and *args is empty.
// On kError, *error says what is wrong ("unbalanced quotes in request"); the
// server replies "-ERR Protocol error: " + *error, as Redis does, and closes the
// connection. On other results *error is untouched.
//
// Bounds: limits::kRequestArgsMax arguments, kRequestArgBytesMax per argument,
// kRequestBytesMax per RESP request, kInlineRequestBytesMax per inline line
// (its line ending included). A request that is still incomplete but already
// provably over a bound, or already malformed, is kError, not kIncomplete.
// Allocates nothing but *args's growth (callers reuse the vector) and, on the
// first quoted inline argument a thread decodes, that thread's buffer.
ParseResult ParseRequest(std::string_view in, std::vector<std::string_view>* args,
                         size_t* consumed, std::string* error);

// Appends a RESP array of bulk strings (how clients send commands).
void AppendCommand(std::string* out, const std::vector<std::string_view>& args);

// --- Replies (server side writes them). --------------------------------------

// Writes replies in the connection's protocol version (2 or 3). Appends to a
// buffer the caller owns; no allocation beyond the buffer's growth.
class ReplyWriter {
 public:
  ReplyWriter(std::string* out, int protover) : out_(out), protover_(protover) {}
  // A CR or LF inside a simple string or error would break the framing; it is
  // written as a space (as Redis does for errors).
  void SimpleString(std::string_view s);   // "+OK"
  void Error(std::string_view text);       // "-ERR ...": text starts with the code
  void Error(const Status& status);        // "-" + status.ToString(); not OK
  void Integer(int64_t v);
  void Bulk(std::string_view s);
  void Null();                             // RESP2 "$-1", RESP3 "_"
  void NullArray();                        // RESP2 "*-1", RESP3 "_"
  void ArrayHeader(size_t n);
  void MapHeader(size_t n);                // RESP2: array of 2n; RESP3: "%n"
  void Boolean(bool b);                    // RESP2: integer 0/1; RESP3: "#t"/"#f"
  int protover() const { return protover_; }

 private:
  std::string* out_;
  int protover_;
};

// --- Replies (client side reads them). ----------------------------------------

struct Value {
  enum class Type : uint8_t {
    kSimple, kError, kInteger, kBulk, kNull, kArray, kMap, kSet, kPush,
    kDouble, kBoolean, kBigNumber, kVerbatim,
  };
  Type type = Type::kNull;
  // simple, error, bulk, double and big number text; verbatim text without its
  // "txt:" format prefix. An error from "-" or "!" keeps its code word.
  std::string str;
  int64_t integer = 0;          // integer; boolean as 0/1
  std::vector<Value> elements;  // array, set, push; map: key, value, key, value...

  bool IsError() const { return type == Type::kError; }
  bool IsNull() const { return type == Type::kNull; }
  // For maps (RESP3) and flat key/value arrays (RESP2): the value under `key`,
  // or nullptr.
  const Value* Find(std::string_view key) const;
  // A RESP error as a Status: the code from its first word, the rest as the
  // message; an unknown first word gives kErr with the whole text as the
  // message. OK for every other type.
  Status ToStatus() const;
};

// Parses one reply of any RESP2/RESP3 type at the front of `in` (attributes
// "|" are parsed and dropped; "$-1" and "*-1" are kNull). Bounds:
// limits::kReplyBytesMax in total, kReplyElementsMax elements (the sum of every
// aggregate's length, a map counting 2 per entry), kReplyDepthMax nested
// aggregates. Streamed RESP3 types ("$?", "*?", ...) are rejected as errors.
// On kOk, *out is replaced and *consumed is the reply's size. On kIncomplete and
// kError, *out is untouched and *consumed is 0; on kError, *error says why
// ("invalid bulk length").
// `in` is validated in full before *out is built, so nothing is allocated for an
// incomplete reply and an allocation never exceeds what `in` holds. An
// incomplete reply costs a scan of `in`: wait for more bytes than before
// re-parsing, or a reply arriving in many small reads is parsed quadratically.
ParseResult ParseReply(std::string_view in, Value* out, size_t* consumed,
                       std::string* error);

}  // namespace tumbler::protocol
