// The small pieces the etcd:// backend (etcd.cc) needs to speak etcd v3's
// JSON gateway (https://etcd.io/docs/v3.4/dev-guide/api_grpc_gateway/)
// without a gRPC stack: a JSON reader, base64, and an HTTP/1.1 client
// connection over a blocking TCP socket whose every wait has a deadline.
//
// Everything that comes off the wire is bounded before memory is taken for
// it (kHttpHeadBytesMax, kHttpBodyBytesMax, kJsonBytesMax, kJsonDepthMax), and
// bad input is an error value (kProtocol), never a crash.
//
// The gateway's shapes: a unary call is POST /v3/<service>/<method> with a
// JSON object body; the reply is one JSON object (Content-Length or chunked).
// A streaming call (watch, lease keepalive) answers a chunked body of JSON
// objects, each followed by "\n". int64 fields come as JSON strings ("42"),
// bytes fields as base64 strings; fields at their zero value are omitted.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/tcp_socket.h"
#include "client/url.h"
#include "tumbler/status.h"

namespace tumbler::client::etcd {

using Clock = std::chrono::steady_clock;
// nullopt: no deadline (wait until the peer answers or the socket breaks).
using Deadline = std::optional<Clock::time_point>;

// --- JSON ----------------------------------------------------------------------

// A JSON text is refused past this size; the replies the backend asks for are
// a few hundred bytes (ranges are limited to 2 keys).
inline constexpr size_t kJsonBytesMax = 1024 * 1024;
// Nesting deeper than this is refused (the gateway's replies nest 5 deep).
inline constexpr int kJsonDepthMax = 32;

// A parsed JSON value. Objects keep their members in text order; a repeated
// key is refused by the parser, so Find is unambiguous.
class Json {
 public:
  enum class Type : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

  Json() = default;
  Type type() const { return type_; }
  bool is_object() const { return type_ == Type::kObject; }
  // The member `key` of an object; nullptr if absent or not an object.
  const Json* Find(std::string_view key) const;
  // Array elements, or object member values (in text order).
  const std::vector<Json>& items() const { return items_; }
  // Object member names, parallel to items().
  const std::vector<std::string>& keys() const { return keys_; }
  // A string's decoded contents, or a number's literal text.
  const std::string& text() const { return text_; }
  bool boolean() const { return bool_; }
  // An int64 as the gateway writes one: a JSON string of decimal digits
  // ("42", "-1") or a JSON integer. nullopt for anything else or overflow.
  std::optional<int64_t> AsInt64() const;

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool bool_ = false;
  std::string text_;
  std::vector<std::string> keys_;
  std::vector<Json> items_;
};

// Parses exactly one JSON value (surrounding whitespace allowed). Errors:
// kProtocol naming the byte offset and what is wrong (syntax, bad escape,
// control character in a string, duplicate key, too deep, too long).
Result<Json> ParseJson(std::string_view text);

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(std::string_view text);

// --- Base64 (RFC 4648 standard alphabet, with padding, as Go writes []byte) --

std::string Base64Encode(std::string_view bytes);
// nullopt unless `text` is canonical padded base64.
std::optional<std::string> Base64Decode(std::string_view text);

// --- HTTP/1.1 --------------------------------------------------------------------

inline constexpr size_t kHttpHeadBytesMax = 16 * 1024;
inline constexpr size_t kHttpBodyBytesMax = 4 * 1024 * 1024;
// One message of a streaming body ("\n"-terminated JSON).
inline constexpr size_t kHttpStreamMessageBytesMax = kJsonBytesMax;
// A chunk-size line (hex digits and extensions) longer than this is refused.
inline constexpr size_t kHttpChunkLineBytesMax = 1024;

// What the status line and headers of a response say.
struct HttpHead {
  int status = 0;                        // 200, 404, ...
  std::optional<size_t> content_length;  // Content-Length, if given
  bool chunked = false;                  // Transfer-Encoding: chunked
  bool close = false;                    // Connection: close, or HTTP/1.0
};

// Parses a response head: `head` is everything up to and including the
// blank line ("\r\n\r\n"). Errors: kProtocol (not HTTP/1.x, bad status, bad or
// conflicting framing headers, a transfer coding other than chunked).
Result<HttpHead> ParseHttpHead(std::string_view head);

// Turns the raw bytes of a response body (as framed by its head) into the
// body's bytes: Content-Length, chunked (extensions and trailers are read and
// ignored), or, with neither, everything until the peer closes. Pure; fed
// whatever arrives.
class HttpBodyDecoder {
 public:
  explicit HttpBodyDecoder(const HttpHead& head);
  // Consumes what it can from the front of *raw and appends the decoded bytes
  // to *out. Errors: kProtocol (bad chunk framing, a chunk or trailer past
  // its bound, more than kHttpBodyBytesMax in all).
  Status Feed(std::string* raw, std::string* out);
  // The peer closed: OK if the body may end here, else kProtocol.
  Status FeedEof();
  // The whole body has been decoded (what follows belongs to the next
  // response).
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kLength, kUntilClose, kChunkSize, kChunkData, kChunkDataEnd, kTrailer, kDone };
  State state_;
  size_t remaining_ = 0;  // kLength / kChunkData: bytes left
  size_t total_ = 0;      // body bytes decoded so far
};

// One HTTP/1.1 connection to one etcd member. Non-blocking socket + poll, so
// every wait has a deadline; TCP keepalive on, so a vanished peer is noticed
// during a long watch.
//
// Threads: one thread uses a connection at a time, except Shutdown(), which
// any thread may call while the connection object lives (it wakes a thread
// blocked in it; that call fails with kUnavailable).
class HttpConnection {
 public:
  HttpConnection() = default;
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Resolves and connects. Errors: kUnavailable (cannot resolve, refused,
  // unreachable, Shutdown), kTimeout (the deadline passed).
  Status Open(const Endpoint& endpoint, Clock::time_point deadline);
  bool is_open() const { return socket_.is_open(); }
  const Endpoint& endpoint() const { return socket_.endpoint(); }

  // Sends `POST path` with a JSON body and reads the response head. The body
  // is then read with ReadBody() or, for a stream, NextMessage(). Errors:
  // kUnavailable (the peer closed or reset, Shutdown), kTimeout, kProtocol.
  // *sent (may be null) says whether any byte may have reached the peer.
  // Any error closes the connection.
  // `extra_headers` are whole header lines, each ending with CRLF.
  Result<HttpHead> Post(std::string_view path, std::string_view body, Deadline deadline,
                        bool* sent, std::string_view extra_headers = {});
  // The rest of the current response's body. Errors as Post.
  Result<std::string> ReadBody(Deadline deadline);
  // The next "\n"-terminated message of a streaming body (without the "\n");
  // nullopt when the body ended. Errors as Post, plus kProtocol for a message
  // longer than kHttpStreamMessageBytesMax.
  Result<std::optional<std::string>> NextMessage(Deadline deadline);

  // True when the connection may carry another request: the last response
  // was read to its end, and the server did not ask to close.
  bool Reusable() const;
  // True if the peer closed or sent something unasked for while idle
  // (checked without blocking); a pooled connection is checked before reuse.
  bool LooksBroken() const;

  // Wakes a thread blocked in this connection. Any thread.
  void Shutdown();
  // Closes the socket. Owning thread only.
  void Close();

 private:
  // Reads more bytes into raw_; kUnavailable at EOF (*eof set) or error.
  Status ReadSome(Deadline deadline, bool* eof);
  // Decodes what raw_ holds into body_, reading from the socket once first
  // when raw_ has nothing decodable. Sets *ended when the body is complete.
  Status Pump(Deadline deadline, bool* ended);
  Status Fail(Status status);  // closes, returns `status`

  TcpSocket socket_;
  std::string raw_;   // received bytes not yet decoded
  std::string body_;  // decoded body bytes not yet handed out
  // The current response's framing; nullopt between responses.
  std::optional<HttpBodyDecoder> decoder_;
  bool close_after_ = false;  // the current response said Connection: close
};

}  // namespace tumbler::client::etcd
