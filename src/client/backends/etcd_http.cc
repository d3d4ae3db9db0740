#include "client/backends/etcd_http.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tumbler::client::etcd {

// --- JSON ----------------------------------------------------------------------

std::optional<int64_t> Json::AsInt64() const {
  if (type_ != Type::kString && type_ != Type::kNumber) return std::nullopt;
  std::string_view s = text_;
  bool negative = !s.empty() && s[0] == '-';
  if (negative) s.remove_prefix(1);
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  // 19 digits fit in uint64_t; the int64 range is checked here.
  constexpr uint64_t kMax = static_cast<uint64_t>(INT64_MAX);
  if (!negative && value > kMax) return std::nullopt;
  if (negative && value > kMax + 1) return std::nullopt;
  if (negative) return value == kMax + 1 ? INT64_MIN : -static_cast<int64_t>(value);
  return static_cast<int64_t>(value);
}

const Json* Json::Find(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == key) return &items_[i];
  }
  return nullptr;
}

// A recursive-descent parser over one text; depth is bounded by
// kJsonDepthMax, so the recursion is too.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Result<Json> ParseDocument() {
    Json value;
    SkipSpace();
    if (Status s = ParseValue(&value, 0); !s.ok()) return s;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected bytes after the value");
    return value;
  }

 private:
  Status Error(std::string_view what) const {
    return Status(StatusCode::kProtocol,
                  "bad JSON at byte " + std::to_string(pos_) + ": " + std::string(what));
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }
  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status ParseValue(Json* out, int depth) {
    if (AtEnd()) return Error("unexpected end");
    char c = Peek();
    if (c == '{' || c == '[') {
      if (depth >= kJsonDepthMax) return Error("nested too deep");
      return c == '{' ? ParseObject(out, depth + 1) : ParseArray(out, depth + 1);
    }
    if (c == '"') {
      out->type_ = Json::Type::kString;
      return ParseString(&out->text_);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
    if (Consume("true")) {
      out->type_ = Json::Type::kBool;
      out->bool_ = true;
      return Status::Ok();
    }
    if (Consume("false")) {
      out->type_ = Json::Type::kBool;
      return Status::Ok();
    }
    if (Consume("null")) {
      out->type_ = Json::Type::kNull;
      return Status::Ok();
    }
    return Error("expected a value");
  }

  Status ParseObject(Json* out, int depth) {
    out->type_ = Json::Type::kObject;
    ++pos_;  // '{'
    SkipSpace();
    if (!AtEnd() && Peek() == '}') {
      ++pos_;
      return Status::Ok();
    }
    while (true) {
      SkipSpace();
      if (AtEnd() || Peek() != '"') return Error("expected a member name");
      std::string key;
      if (Status s = ParseString(&key); !s.ok()) return s;
      for (const std::string& k : out->keys_) {
        if (k == key) return Error("duplicate member \"" + key + "\"");
      }
      SkipSpace();
      if (AtEnd() || Peek() != ':') return Error("expected ':'");
      ++pos_;
      SkipSpace();
      Json value;
      if (Status s = ParseValue(&value, depth); !s.ok()) return s;
      out->keys_.push_back(std::move(key));
      out->items_.push_back(std::move(value));
      SkipSpace();
      if (AtEnd()) return Error("unterminated object");
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        return Status::Ok();
      }
      return Error("expected ',' or '}'");
    }
  }

  Status ParseArray(Json* out, int depth) {
    out->type_ = Json::Type::kArray;
    ++pos_;  // '['
    SkipSpace();
    if (!AtEnd() && Peek() == ']') {
      ++pos_;
      return Status::Ok();
    }
    while (true) {
      SkipSpace();
      Json value;
      if (Status s = ParseValue(&value, depth); !s.ok()) return s;
      out->items_.push_back(std::move(value));
      SkipSpace();
      if (AtEnd()) return Error("unterminated array");
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == ']') {
        ++pos_;
        return Status::Ok();
      }
      return Error("expected ',' or ']'");
    }
  }

  // The grammar of RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  Status ParseNumber(Json* out) {
    size_t start = pos_;
    auto digits = [&] {
      size_t from = pos_;
      while (!AtEnd() && Peek() >= '0' && Peek() <= '9') ++pos_;
      return pos_ - from;
    };
    if (Peek() == '-') ++pos_;
    if (AtEnd()) return Error("bad number");
    if (Peek() == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Error("bad number");
    }
    if (!AtEnd() && Peek() == '.') {
      ++pos_;
      if (digits() == 0) return Error("bad number: no digits after '.'");
    }
    if (!AtEnd() && (Peek() == 'e' || Peek() == 'E')) {
      ++pos_;
      if (!AtEnd() && (Peek() == '+' || Peek() == '-')) ++pos_;
      if (digits() == 0) return Error("bad number: no exponent digits");
    }
    out->type_ = Json::Type::kNumber;
    out->text_ = std::string(text_.substr(start, pos_ - start));
    return Status::Ok();
  }

  Status ParseHex4(uint32_t* out) {
    if (text_.size() - pos_ < 4) return Error("short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Error("bad hex digit in \\u escape");
      }
    }
    *out = v;
    return Status::Ok();
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  Status ParseEscape(std::string* out) {
    if (AtEnd()) return Error("unterminated escape");
    char c = text_[pos_++];
    switch (c) {
      case '"': out->push_back('"'); return Status::Ok();
      case '\\': out->push_back('\\'); return Status::Ok();
      case '/': out->push_back('/'); return Status::Ok();
      case 'b': out->push_back('\b'); return Status::Ok();
      case 'f': out->push_back('\f'); return Status::Ok();
      case 'n': out->push_back('\n'); return Status::Ok();
      case 'r': out->push_back('\r'); return Status::Ok();
      case 't': out->push_back('\t'); return Status::Ok();
      case 'u': break;
      default: return Error("unknown escape");
    }
    uint32_t cp = 0;
    if (Status s = ParseHex4(&cp); !s.ok()) return s;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return Error("lone low surrogate");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (!Consume("\\u")) return Error("high surrogate without its low half");
      uint32_t low = 0;
      if (Status s = ParseHex4(&low); !s.ok()) return s;
      if (low < 0xDC00 || low > 0xDFFF) return Error("high surrogate without its low half");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    AppendUtf8(cp, out);
    return Status::Ok();
  }

  Status ParseString(std::string* out) {
    ++pos_;  // '"'
    while (true) {
      if (AtEnd()) return Error("unterminated string");
      char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return Status::Ok();
      }
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in a string");
      ++pos_;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (Status s = ParseEscape(out); !s.ok()) return s;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

Result<Json> ParseJson(std::string_view text) {
  if (text.size() > kJsonBytesMax) {
    return Status(StatusCode::kProtocol, "JSON text of " + std::to_string(text.size()) +
                                             " bytes is over the bound of " +
                                             std::to_string(kJsonBytesMax));
  }
  return JsonParser(text).ParseDocument();
}

std::string JsonQuote(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20) {
      out += "\\u00";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xF]);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

// --- Base64 ----------------------------------------------------------------------

namespace {
constexpr char kBase64Alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) |
                 (static_cast<uint8_t>(bytes[i + 1]) << 8) | static_cast<uint8_t>(bytes[i + 2]);
    out.push_back(kBase64Alphabet[(v >> 18) & 63]);
    out.push_back(kBase64Alphabet[(v >> 12) & 63]);
    out.push_back(kBase64Alphabet[(v >> 6) & 63]);
    out.push_back(kBase64Alphabet[v & 63]);
  }
  size_t left = bytes.size() - i;
  if (left > 0) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (left == 2) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out.push_back(kBase64Alphabet[(v >> 18) & 63]);
    out.push_back(kBase64Alphabet[(v >> 12) & 63]);
    out.push_back(left == 2 ? kBase64Alphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      char c = text[i + j];
      if (c == '=' && last && j >= 2) {
        v[j] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return std::nullopt;  // a data character after '='
      v[j] = Base64Value(c);
      if (v[j] < 0) return std::nullopt;
    }
    uint32_t bits = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    // Canonical form: the bits that padding drops must be zero.
    if (pad == 2 && (bits & 0xFFFF) != 0) return std::nullopt;
    if (pad == 1 && (bits & 0xFF) != 0) return std::nullopt;
    out.push_back(static_cast<char>(bits >> 16));
    if (pad < 2) out.push_back(static_cast<char>((bits >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(bits & 0xFF));
  }
  return out;
}

// --- HTTP head -------------------------------------------------------------------

namespace {

Status HttpError(std::string what) { return Status(StatusCode::kProtocol, "HTTP: " + what); }

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

// True if the comma-separated list `value` has the token `word`.
bool ListHas(std::string_view value, std::string_view word) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view item = Trim(value.substr(0, comma));
    if (EqualsNoCase(item, word)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

Result<HttpHead> ParseHttpHead(std::string_view head) {
  if (head.size() > kHttpHeadBytesMax) return HttpError("response head over its bound");
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n") {
    return HttpError("response head does not end with a blank line");
  }
  head.remove_suffix(2);  // every line, the last included, now ends with CRLF
  HttpHead out;
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  head.remove_prefix(eol + 2);
  // "HTTP/1.1 200 OK": version, three-digit status, optional reason.
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || (line[7] != '0' && line[7] != '1') ||
      line[8] != ' ' || (line.size() > 12 && line[12] != ' ')) {
    return HttpError("bad status line \"" + std::string(line.substr(0, 64)) + "\"");
  }
  int status = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') return HttpError("bad status code");
    status = status * 10 + (line[i] - '0');
  }
  if (status < 100 || status > 599) return HttpError("status code out of range");
  out.status = status;
  out.close = line[7] == '0';
  while (!head.empty()) {
    eol = head.find("\r\n");
    line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    if (line.empty() || line[0] == ' ' || line[0] == '\t') {
      return HttpError("folded or empty header line");
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return HttpError("header without a name");
    std::string_view name = line.substr(0, colon);
    for (char c : name) {
      if (!IsTokenChar(c)) return HttpError("bad character in a header name");
    }
    std::string_view value = Trim(line.substr(colon + 1));
    if (EqualsNoCase(name, "content-length")) {
      if (value.empty() || value.size() > 12) return HttpError("bad Content-Length");
      size_t n = 0;
      for (char c : value) {
        if (c < '0' || c > '9') return HttpError("bad Content-Length");
        n = n * 10 + static_cast<size_t>(c - '0');
      }
      if (out.content_length && *out.content_length != n) {
        return HttpError("conflicting Content-Length headers");
      }
      if (n > kHttpBodyBytesMax) return HttpError("body over its bound");
      out.content_length = n;
    } else if (EqualsNoCase(name, "transfer-encoding")) {
      if (!EqualsNoCase(value, "chunked")) {
        return HttpError("unsupported Transfer-Encoding \"" + std::string(value) + "\"");
      }
      out.chunked = true;
    } else if (EqualsNoCase(name, "connection")) {
      if (ListHas(value, "close")) out.close = true;
    }
  }
  // RFC 9112 6.3: chunked framing wins over a Content-Length.
  if (out.chunked) out.content_length.reset();
  return out;
}

// --- HTTP body ---------------------------------------------------------------------

HttpBodyDecoder::HttpBodyDecoder(const HttpHead& head) {
  bool no_body = (head.status >= 100 && head.status < 200) || head.status == 204 ||
                 head.status == 304;
  if (no_body) {
    state_ = State::kDone;
  } else if (head.chunked) {
    state_ = State::kChunkSize;
  } else if (head.content_length) {
    remaining_ = *head.content_length;
    state_ = remaining_ == 0 ? State::kDone : State::kLength;
  } else {
    state_ = State::kUntilClose;
  }
}

Status HttpBodyDecoder::Feed(std::string* raw, std::string* out) {
  size_t pos = 0;
  Status status;
  bool need_more = false;  // what raw_ holds ends inside a framing line
  auto take = [&](size_t n) {
    out->append(*raw, pos, n);
    pos += n;
    total_ += n;
  };
  while (status.ok() && !need_more && state_ != State::kDone && pos < raw->size()) {
    size_t avail = raw->size() - pos;
    switch (state_) {
      case State::kLength:
      case State::kChunkData: {
        size_t n = std::min(avail, remaining_);
        take(n);
        remaining_ -= n;
        if (remaining_ == 0) state_ = state_ == State::kLength ? State::kDone : State::kChunkDataEnd;
        break;
      }
      case State::kUntilClose:
        if (total_ + avail > kHttpBodyBytesMax) {
          status = HttpError("body over its bound");
          break;
        }
        take(avail);
        break;
      case State::kChunkDataEnd:
        if (avail < 2) {
          need_more = true;
          break;
        }
        if (raw->compare(pos, 2, "\r\n") != 0) {
          status = HttpError("chunk not followed by CRLF");
          break;
        }
        pos += 2;
        state_ = State::kChunkSize;
        break;
      case State::kChunkSize: {
        size_t eol = raw->find("\r\n", pos);
        if (eol == std::string::npos) {
          if (avail > kHttpChunkLineBytesMax) status = HttpError("chunk-size line over its bound");
          need_more = true;
          break;
        }
        if (eol - pos > kHttpChunkLineBytesMax) {
          status = HttpError("chunk-size line over its bound");
          break;
        }
        std::string_view line(raw->data() + pos, eol - pos);
        line = Trim(line.substr(0, line.find(';')));  // extensions are ignored
        if (line.empty() || line.size() > 8) {
          status = HttpError("bad chunk size");
          break;
        }
        size_t n = 0;
        for (char c : line) {
          int d = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                           : -1;
          if (d < 0) {
            status = HttpError("bad chunk size");
            break;
          }
          n = n * 16 + static_cast<size_t>(d);
        }
        if (!status.ok()) break;
        if (n > kHttpBodyBytesMax) {
          status = HttpError("chunk over its bound");
          break;
        }
        pos = eol + 2;
        remaining_ = n;
        if (n == 0) {
          remaining_ = 0;  // now counts trailer bytes
          state_ = State::kTrailer;
        } else {
          state_ = State::kChunkData;
        }
        break;
      }
      case State::kTrailer: {
        size_t eol = raw->find("\r\n", pos);
        size_t line_bytes = eol == std::string::npos ? avail : eol - pos;
        if (remaining_ + line_bytes > kHttpHeadBytesMax) {
          status = HttpError("trailer over its bound");
          break;
        }
        if (eol == std::string::npos) {
          need_more = true;
          break;
        }
        pos = eol + 2;
        remaining_ += line_bytes + 2;
        if (line_bytes == 0) state_ = State::kDone;
        break;
      }
      case State::kDone:
        break;
    }
  }
  raw->erase(0, pos);
  return status;
}

Status HttpBodyDecoder::FeedEof() {
  if (state_ == State::kUntilClose) {
    state_ = State::kDone;
    return Status::Ok();
  }
  if (state_ == State::kDone) return Status::Ok();
  return Status(StatusCode::kUnavailable, "the server closed the connection inside a response");
}

// --- HTTP connection ---------------------------------------------------------------

namespace {

// Interim (1xx) responses skipped before the real one.
constexpr int kInterimResponsesMax = 4;
// Bytes taken from the socket per read.
constexpr size_t kReadBytesMax = 64 * 1024;

}  // namespace

HttpConnection::~HttpConnection() { Close(); }

void HttpConnection::Close() {
  socket_.Close();
  raw_.clear();
  body_.clear();
  decoder_.reset();
  close_after_ = false;
}

void HttpConnection::Shutdown() { socket_.Shutdown(); }

Status HttpConnection::Fail(Status status) {
  Close();
  return status;
}

Status HttpConnection::Open(const Endpoint& endpoint, Clock::time_point deadline) {
  Close();
  return socket_.Open(endpoint, deadline);
}

Status HttpConnection::ReadSome(Deadline deadline, bool* eof) {
  while (true) {
    size_t before = raw_.size();
    if (Status s = socket_.ReadAvailable(&raw_, kReadBytesMax, eof); !s.ok()) return s;
    if (raw_.size() > before) {
      // Bytes first; the end of the stream is seen again by the next read.
      *eof = false;
      return Status::Ok();
    }
    if (*eof) return Status::Ok();
    if (Status ready = socket_.WaitReady(POLLIN, deadline); !ready.ok()) return ready;
  }
}

Result<HttpHead> HttpConnection::Post(std::string_view path, std::string_view body,
                                      Deadline deadline, bool* sent,
                                      std::string_view extra_headers) {
  bool sent_any = false;
  if (sent != nullptr) *sent = false;
  if (!socket_.is_open()) return Status(StatusCode::kUnavailable, "not connected");
  if (decoder_ && !Reusable()) {
    return Fail(Status(StatusCode::kUnavailable, "the connection still carries a response"));
  }
  decoder_.reset();
  body_.clear();
  std::string request;
  request.reserve(160 + path.size() + extra_headers.size() + body.size());
  request += "POST ";
  request += path;
  request += " HTTP/1.1\r\nHost: ";
  request += socket_.endpoint().ToString();
  request += "\r\nContent-Type: application/json\r\n";
  request += extra_headers;
  request += "Content-Length: ";
  request += std::to_string(body.size());
  request += "\r\n\r\n";
  request += body;
  Status status = socket_.SendAll(request, deadline, &sent_any);
  if (sent != nullptr) *sent = sent_any;
  if (!status.ok()) return Fail(status);
  for (int interim = 0; interim <= kInterimResponsesMax; ++interim) {
    size_t end;
    while ((end = raw_.find("\r\n\r\n")) == std::string::npos) {
      if (raw_.size() > kHttpHeadBytesMax) return Fail(HttpError("response head over its bound"));
      bool eof = false;
      if (Status s = ReadSome(deadline, &eof); !s.ok()) return Fail(s);
      if (eof) {
        return Fail(Status(StatusCode::kUnavailable,
                           socket_.endpoint().ToString() + ": the server closed the connection"));
      }
    }
    Result<HttpHead> head = ParseHttpHead(std::string_view(raw_).substr(0, end + 4));
    if (!head.ok()) return Fail(head.status());
    raw_.erase(0, end + 4);
    if (head->status >= 100 && head->status < 200) continue;
    decoder_.emplace(*head);
    close_after_ = head->close;
    return head;
  }
  return Fail(HttpError("too many interim responses"));
}

Status HttpConnection::Pump(Deadline deadline, bool* ended) {
  *ended = false;
  if (!decoder_) return HttpError("no response is being read");
  size_t before = body_.size();
  if (Status s = decoder_->Feed(&raw_, &body_); !s.ok()) return s;
  if (decoder_->done()) {
    *ended = true;
    return Status::Ok();
  }
  if (body_.size() > before) return Status::Ok();
  bool eof = false;
  if (Status s = ReadSome(deadline, &eof); !s.ok()) return s;
  if (eof) {
    // Bytes left undecoded at EOF are a truncated chunk: FeedEof reports it.
    if (Status s = decoder_->FeedEof(); !s.ok()) return s;
    close_after_ = true;
    *ended = true;
    return Status::Ok();
  }
  if (Status s = decoder_->Feed(&raw_, &body_); !s.ok()) return s;
  *ended = decoder_->done();
  return Status::Ok();
}

Result<std::string> HttpConnection::ReadBody(Deadline deadline) {
  if (!socket_.is_open()) return Status(StatusCode::kUnavailable, "not connected");
  while (true) {
    bool ended = false;
    if (Status s = Pump(deadline, &ended); !s.ok()) return Fail(s);
    if (body_.size() > kHttpBodyBytesMax) return Fail(HttpError("body over its bound"));
    if (ended) break;
  }
  std::string out;
  out.swap(body_);
  return out;
}

Result<std::optional<std::string>> HttpConnection::NextMessage(Deadline deadline) {
  if (!socket_.is_open()) return Status(StatusCode::kUnavailable, "not connected");
  size_t searched = 0;  // body_[0, searched) has no '\n'
  while (true) {
    size_t nl = body_.find('\n', searched);
    if (nl != std::string::npos) {
      std::string message = body_.substr(0, nl);
      body_.erase(0, nl + 1);
      return std::optional<std::string>(std::move(message));
    }
    searched = body_.size();
    if (body_.size() > kHttpStreamMessageBytesMax) {
      return Fail(HttpError("stream message over its bound"));
    }
    if (decoder_ && decoder_->done()) {
      if (body_.empty()) return std::optional<std::string>();
      std::string message;
      message.swap(body_);
      return std::optional<std::string>(std::move(message));
    }
    bool ended = false;
    if (Status s = Pump(deadline, &ended); !s.ok()) return Fail(s);
  }
}

bool HttpConnection::Reusable() const {
  return socket_.is_open() && decoder_ && decoder_->done() && !close_after_ && raw_.empty() &&
         body_.empty();
}

bool HttpConnection::LooksBroken() const {
  // Readable while idle means EOF, a reset, or bytes nobody asked for.
  return !raw_.empty() || socket_.ReadableWhileIdle();
}

}  // namespace tumbler::client::etcd
