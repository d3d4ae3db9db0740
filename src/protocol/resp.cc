// RESP2 / RESP3 codec. The wire format as tumbler speaks it is in
// docs/protocol.md; where Redis is lenient or strict, this file says which and
// why. Two rules run through it:
//   - every length read off the wire is checked against limits.h before it is
//     used, and a request or reply that is incomplete but already provably over
//     a bound (or malformed) is an error at once, not a wait for more bytes;
//   - the request parser is the server's hot path: it returns views into the
//     input and allocates nothing but the caller's reused args vector.
#include "protocol/resp.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cstring>
#include <limits>

namespace tumbler::protocol {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// The smallest bulk string a RESP request can hold: "$0\r\n\r\n".
constexpr size_t kBulkBytesMin = 6;

ParseResult Fail(std::string* error, std::string_view text) {
  error->assign(text);
  return ParseResult::kError;
}

// Scans the decimal integer that starts at in[*pos] and ends with "\r\n", with
// the rules of Redis' string2ll: an optional '-', then "0" alone or a digit 1-9
// followed by digits; no '+', no spaces, no leading zeros, no "-0". On kOk,
// *value is the number and *pos is past the CRLF; otherwise *pos is unchanged.
// kError as soon as the bytes seen so far cannot begin a valid number in
// [min, max], so an over-long or oversize length never waits for more bytes.
// Stricter than Redis in one place: Redis skips the two bytes after the number
// unseen; here they must be "\r\n".
ParseResult ScanInteger(std::string_view in, size_t* pos, int64_t min, int64_t max,
                        int64_t* value) {
  assert(min <= 0);
  assert(max >= 0);
  size_t p = *pos;
  const size_t n = in.size();
  if (p == n) return ParseResult::kIncomplete;
  const bool negative = in[p] == '-';
  if (negative) {
    if (min == 0) return ParseResult::kError;
    ++p;
    if (p == n) return ParseResult::kIncomplete;
  }
  // The largest magnitude allowed, computed without overflowing -INT64_MIN.
  const uint64_t limit = negative ? static_cast<uint64_t>(-(min + 1)) + 1
                                  : static_cast<uint64_t>(max);
  uint64_t magnitude = 0;
  if (in[p] == '0') {
    if (negative) return ParseResult::kError;
    ++p;
  } else if (in[p] >= '1' && in[p] <= '9') {
    while (p < n && in[p] >= '0' && in[p] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(in[p] - '0');
      if (magnitude > limit / 10) return ParseResult::kError;
      magnitude *= 10;
      if (digit > limit - magnitude) return ParseResult::kError;
      magnitude += digit;
      ++p;
    }
  } else {
    return ParseResult::kError;
  }
  if (p == n) return ParseResult::kIncomplete;
  if (in[p] != '\r') return ParseResult::kError;
  if (p + 1 == n) return ParseResult::kIncomplete;
  if (in[p + 1] != '\n') return ParseResult::kError;
  // C++20 defines the conversion of 2^63 to INT64_MIN.
  *value = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  *pos = p + 2;
  return ParseResult::kOk;
}

// --- Requests: RESP arrays of bulk strings. -----------------------------------

ParseResult ParseMultibulk(std::string_view in, std::vector<std::string_view>* args,
                           size_t* consumed, std::string* error) {
  size_t pos = 1;  // past '*'
  int64_t count = 0;
  // Any count <= 0 is an empty request, as in Redis.
  switch (ScanInteger(in, &pos, kInt64Min, limits::kRequestArgsMax, &count)) {
    case ParseResult::kOk: break;
    case ParseResult::kIncomplete: return ParseResult::kIncomplete;
    case ParseResult::kError: return Fail(error, "invalid multibulk length");
  }
  if (count <= 0) {
    *consumed = pos;
    return ParseResult::kOk;
  }
  const size_t args_count = static_cast<size_t>(count);
  args->reserve(args_count);  // <= kRequestArgsMax; allocates once per vector
  for (size_t i = 0; i < args_count; ++i) {
    // The request is at least this long even if every argument left is empty.
    if (pos + (args_count - i) * kBulkBytesMin > limits::kRequestBytesMax) {
      return Fail(error, "too big request");
    }
    if (pos == in.size()) return ParseResult::kIncomplete;
    if (in[pos] != '$') {
      std::string text = "expected '$', got ' '";
      text[text.size() - 2] = in[pos];
      return Fail(error, text);
    }
    ++pos;
    int64_t length = 0;
    switch (ScanInteger(in, &pos, 0, limits::kRequestArgBytesMax, &length)) {
      case ParseResult::kOk: break;
      case ParseResult::kIncomplete: return ParseResult::kIncomplete;
      case ParseResult::kError: return Fail(error, "invalid bulk length");
    }
    const size_t data = pos;
    const size_t end = data + static_cast<size_t>(length) + 2;
    if (end + (args_count - i - 1) * kBulkBytesMin > limits::kRequestBytesMax) {
      return Fail(error, "too big request");
    }
    if (end > in.size()) return ParseResult::kIncomplete;
    // Redis skips these two bytes unseen; a wrong length would then silently
    // desynchronise the stream, so tumbler checks them.
    if (in[end - 2] != '\r' || in[end - 1] != '\n') {
      return Fail(error, "expected CRLF after bulk data");
    }
    args->push_back(in.substr(data, static_cast<size_t>(length)));
    pos = end;
  }
  *consumed = pos;
  return ParseResult::kOk;
}

// --- Requests: inline commands, split as Redis' sdssplitargs does. -------------

// isspace() in the C locale: what separates arguments.
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// What ends an unquoted argument (sdssplitargs: \v and \f do not).
bool IsArgEnd(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

char DoubleQuoteEscape(char c) {
  switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'b': return '\b';
    case 'a': return '\a';
    default: return c;
  }
}

// Scans a quoted section whose opening quote is line[*pos - 1], up to and past
// its closing quote. Appends the decoded bytes to *out unless out is nullptr;
// sets *escaped if any escape sequence occurs. False if the quote is not closed,
// or is followed by something other than a space or the end of the line.
//   "...": \xHH (two hex digits), \n \r \t \b \a, and \ before any other byte
//          stands for that byte.
//   '...': \' is a quote; every other byte, backslashes included, is itself.
bool ScanQuoted(std::string_view line, size_t* pos, char quote, std::string* out,
                bool* escaped) {
  const size_t n = line.size();
  size_t p = *pos;
  for (;;) {
    if (p == n) return false;
    const char c = line[p];
    if (c == quote) {
      if (p + 1 < n && !IsSpace(line[p + 1])) return false;
      *pos = p + 1;
      return true;
    }
    if (c == '\\' && quote == '"' && p + 3 < n && line[p + 1] == 'x' &&
        HexValue(line[p + 2]) >= 0 && HexValue(line[p + 3]) >= 0) {
      *escaped = true;
      if (out) out->push_back(static_cast<char>(HexValue(line[p + 2]) * 16 + HexValue(line[p + 3])));
      p += 4;
    } else if (c == '\\' && quote == '"' && p + 1 < n) {
      *escaped = true;
      if (out) out->push_back(DoubleQuoteEscape(line[p + 1]));
      p += 2;
    } else if (c == '\\' && quote == '\'' && p + 1 < n && line[p + 1] == '\'') {
      *escaped = true;
      if (out) out->push_back('\'');
      p += 2;
    } else {
      if (out) out->push_back(c);
      ++p;
    }
  }
}

// Decoded inline arguments live here. Decoding never lengthens an argument, so
// reserving the line's length up front means the buffer never moves while one
// line is split, and views into it stay valid until the next call.
thread_local std::string t_inline_scratch;

class InlineSplitter {
 public:
  explicit InlineSplitter(std::string_view line) : line_(line) {}

  // Appends the next argument at or after *pos to *arg; false on bad quotes.
  bool Next(size_t* pos, std::string_view* arg) {
    const size_t n = line_.size();
    const size_t start = *pos;
    size_t p = start;
    while (p < n && !IsArgEnd(line_[p]) && line_[p] != '"' && line_[p] != '\'') ++p;
    if (p == n || IsArgEnd(line_[p])) {
      *arg = line_.substr(start, p - start);
      *pos = p;
      return true;
    }
    // An unquoted prefix, then a quoted section that ends the argument
    // (foo"bar" is one argument, foobar, as in Redis).
    const std::string_view prefix = line_.substr(start, p - start);
    const char quote = line_[p];
    const size_t body = p + 1;
    size_t after = body;
    bool escaped = false;
    if (!ScanQuoted(line_, &after, quote, nullptr, &escaped)) return false;
    *pos = after;
    if (prefix.empty() && !escaped) {
      *arg = line_.substr(body, after - 1 - body);  // a view, quotes excluded
      return true;
    }
    std::string& scratch = Scratch();
    const size_t capacity = scratch.capacity();
    const size_t arg_start = scratch.size();
    scratch.append(prefix);
    size_t again = body;
    const bool ok = ScanQuoted(line_, &again, quote, &scratch, &escaped);
    assert(ok);
    assert(again == after);
    assert(scratch.capacity() == capacity);  // earlier views are still valid
    (void)ok;
    (void)capacity;
    *arg = std::string_view(scratch).substr(arg_start);
    return true;
  }

 private:
  std::string& Scratch() {
    if (!scratch_ready_) {
      t_inline_scratch.clear();
      t_inline_scratch.reserve(line_.size());
      scratch_ready_ = true;
    }
    return t_inline_scratch;
  }

  std::string_view line_;
  bool scratch_ready_ = false;
};

ParseResult SplitInline(std::string_view line, std::vector<std::string_view>* args,
                        std::string* error) {
  InlineSplitter splitter(line);
  size_t pos = 0;
  for (;;) {
    while (pos < line.size() && IsSpace(line[pos])) ++pos;
    if (pos == line.size()) return ParseResult::kOk;
    if (args->size() == limits::kRequestArgsMax) {
      return Fail(error, "too many arguments in inline request");
    }
    std::string_view arg;
    if (!splitter.Next(&pos, &arg)) {
      return Fail(error, "unbalanced quotes in request");
    }
    if (arg.size() > limits::kRequestArgBytesMax) {
      return Fail(error, "too big argument in inline request");
    }
    args->push_back(arg);
  }
}

ParseResult ParseInline(std::string_view in, std::vector<std::string_view>* args,
                        size_t* consumed, std::string* error) {
  // The line, its ending included, must fit in kInlineRequestBytesMax.
  const size_t window = std::min(in.size(), limits::kInlineRequestBytesMax);
  const char* newline = static_cast<const char*>(std::memchr(in.data(), '\n', window));
  if (newline == nullptr) {
    if (in.size() >= limits::kInlineRequestBytesMax) {
      return Fail(error, "too big inline request");
    }
    return ParseResult::kIncomplete;
  }
  const size_t line_end = static_cast<size_t>(newline - in.data());
  std::string_view line = in.substr(0, line_end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // Redis splits the line as a C string: a NUL byte ends it.
  if (const void* nul = line.empty() ? nullptr : std::memchr(line.data(), '\0', line.size())) {
    line = line.substr(0, static_cast<size_t>(static_cast<const char*>(nul) - line.data()));
  }
  const ParseResult result = SplitInline(line, args, error);
  if (result != ParseResult::kOk) return result;
  *consumed = line_end + 1;
  return ParseResult::kOk;
}

// --- Replies. --------------------------------------------------------------------

// One pass over a reply. With out == nullptr it only validates (and allocates
// nothing); ParseReply runs it so first, then again to build the Value from
// input known to be whole and valid.
class ReplyParser {
 public:
  ReplyParser(std::string_view in, std::string* error) : in_(in), error_(error) {}

  size_t pos() const { return pos_; }

  ParseResult Parse(Value* out, size_t depth) {
    for (;;) {
      if (pos_ == in_.size()) return ParseResult::kIncomplete;
      const char type = in_[pos_++];
      switch (type) {
        case '+': return Line(out, Value::Type::kSimple);
        case '-': return Line(out, Value::Type::kError);
        case ',': return Line(out, Value::Type::kDouble);
        case '(': return Line(out, Value::Type::kBigNumber);
        case ':': return Integer(out);
        case '_': return Null(out);
        case '#': return Boolean(out);
        case '$': return Blob(out, Value::Type::kBulk);
        case '!': return Blob(out, Value::Type::kError);
        case '=': return Blob(out, Value::Type::kVerbatim);
        case '*': return Aggregate(out, Value::Type::kArray, depth);
        case '~': return Aggregate(out, Value::Type::kSet, depth);
        case '>': return Aggregate(out, Value::Type::kPush, depth);
        case '%': return Aggregate(out, Value::Type::kMap, depth);
        case '|': {
          // An attribute annotates the value after it; it is dropped.
          const ParseResult result = Aggregate(nullptr, Value::Type::kMap, depth);
          if (result != ParseResult::kOk) return result;
          continue;
        }
        default: {
          std::string text = "invalid reply type ' '";
          text[text.size() - 2] = type;
          return Fail(error_, text);
        }
      }
    }
  }

 private:
  static void Reset(Value* out, Value::Type type) {
    out->type = type;
    out->str.clear();
    out->integer = 0;
    out->elements.clear();
  }

  // Finds the "\r\n" that ends a line starting at pos_; on kOk, *line is its
  // text and pos_ is past it.
  ParseResult ReadLine(std::string_view* line) {
    const size_t left = in_.size() - pos_;
    const char* cr = static_cast<const char*>(
        left == 0 ? nullptr : std::memchr(in_.data() + pos_, '\r', left));
    if (cr == nullptr) return ParseResult::kIncomplete;
    const size_t end = static_cast<size_t>(cr - in_.data());
    if (end + 1 == in_.size()) return ParseResult::kIncomplete;
    if (in_[end + 1] != '\n') return Fail(error_, "expected '\\n' after '\\r'");
    *line = in_.substr(pos_, end - pos_);
    pos_ = end + 2;
    return ParseResult::kOk;
  }

  static bool AllDigits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  }

  static std::string_view SkipSign(std::string_view s) {
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
    return s;
  }

  // RESP3 doubles: [sign] digits [. digits] [e|E [sign] digits], inf, nan.
  static bool ValidDouble(std::string_view s) {
    s = SkipSign(s);
    if (s == "inf" || s == "nan") return true;
    const size_t exponent = s.find_first_of("eE");
    if (exponent != std::string_view::npos) {
      if (!AllDigits(SkipSign(s.substr(exponent + 1)))) return false;
      s = s.substr(0, exponent);
    }
    const size_t dot = s.find('.');
    if (dot != std::string_view::npos) {
      if (!AllDigits(s.substr(dot + 1))) return false;
      s = s.substr(0, dot);
    }
    return AllDigits(s);
  }

  ParseResult Line(Value* out, Value::Type type) {
    std::string_view line;
    const ParseResult result = ReadLine(&line);
    if (result != ParseResult::kOk) return result;
    if (type == Value::Type::kDouble && !ValidDouble(line)) {
      return Fail(error_, "invalid double");
    }
    if (type == Value::Type::kBigNumber && !AllDigits(SkipSign(line))) {
      return Fail(error_, "invalid big number");
    }
    if (out) {
      Reset(out, type);
      out->str.assign(line);
    }
    return ParseResult::kOk;
  }

  ParseResult Integer(Value* out) {
    int64_t value = 0;
    const ParseResult result = ScanInteger(in_, &pos_, kInt64Min, kInt64Max, &value);
    if (result == ParseResult::kError) return Fail(error_, "invalid integer");
    if (result == ParseResult::kOk && out) {
      Reset(out, Value::Type::kInteger);
      out->integer = value;
    }
    return result;
  }

  ParseResult Null(Value* out) {
    if (in_.size() - pos_ < 2) {
      if (pos_ < in_.size() && in_[pos_] != '\r') return Fail(error_, "invalid null");
      return ParseResult::kIncomplete;
    }
    if (in_[pos_] != '\r' || in_[pos_ + 1] != '\n') return Fail(error_, "invalid null");
    pos_ += 2;
    if (out) Reset(out, Value::Type::kNull);
    return ParseResult::kOk;
  }

  ParseResult Boolean(Value* out) {
    static constexpr std::string_view kTrue = "t\r\n";
    static constexpr std::string_view kFalse = "f\r\n";
    const std::string_view rest = in_.substr(pos_, 3);
    const bool is_true = kTrue.starts_with(rest);
    if (!is_true && !kFalse.starts_with(rest)) return Fail(error_, "invalid boolean");
    if (rest.size() < 3) return ParseResult::kIncomplete;
    pos_ += 3;
    if (out) {
      Reset(out, Value::Type::kBoolean);
      out->integer = is_true ? 1 : 0;
    }
    return ParseResult::kOk;
  }

  // "$", "!" and "=": a length, the bytes, CRLF.
  ParseResult Blob(Value* out, Value::Type type) {
    if (pos_ < in_.size() && in_[pos_] == '?') {
      return Fail(error_, "streamed strings are not supported");
    }
    int64_t length = 0;
    const int64_t min = type == Value::Type::kBulk ? -1 : 0;
    switch (ScanInteger(in_, &pos_, min, limits::kReplyBytesMax, &length)) {
      case ParseResult::kOk: break;
      case ParseResult::kIncomplete: return ParseResult::kIncomplete;
      case ParseResult::kError: return Fail(error_, "invalid bulk length");
    }
    if (length < 0) {
      if (out) Reset(out, Value::Type::kNull);
      return ParseResult::kOk;
    }
    const size_t data = pos_;
    const size_t end = data + static_cast<size_t>(length) + 2;
    if (end > limits::kReplyBytesMax) return Fail(error_, "too big reply");
    if (end > in_.size()) return ParseResult::kIncomplete;
    if (in_[end - 2] != '\r' || in_[end - 1] != '\n') {
      return Fail(error_, "expected CRLF after bulk data");
    }
    std::string_view text = in_.substr(data, static_cast<size_t>(length));
    if (type == Value::Type::kVerbatim) {
      // "txt:" or "mkd:" and the text.
      if (text.size() < 4 || text[3] != ':') return Fail(error_, "invalid verbatim string");
      text.remove_prefix(4);
    }
    pos_ = end;
    if (out) {
      Reset(out, type);
      out->str.assign(text);
    }
    return ParseResult::kOk;
  }

  // "*", "~", ">", "%" (and "|" with out == nullptr): a count, then elements.
  ParseResult Aggregate(Value* out, Value::Type type, size_t depth) {
    if (pos_ < in_.size() && in_[pos_] == '?') {
      return Fail(error_, "streamed aggregates are not supported");
    }
    const bool pairs = type == Value::Type::kMap;
    const int64_t min = type == Value::Type::kArray ? -1 : 0;
    const int64_t max = pairs ? limits::kReplyElementsMax / 2 : limits::kReplyElementsMax;
    int64_t count = 0;
    switch (ScanInteger(in_, &pos_, min, max, &count)) {
      case ParseResult::kOk: break;
      case ParseResult::kIncomplete: return ParseResult::kIncomplete;
      case ParseResult::kError: return Fail(error_, "invalid aggregate length");
    }
    if (count < 0) {
      if (out) Reset(out, Value::Type::kNull);
      return ParseResult::kOk;
    }
    if (depth >= limits::kReplyDepthMax) return Fail(error_, "too deeply nested reply");
    const size_t elements = static_cast<size_t>(count) * (pairs ? 2 : 1);
    if (elements > limits::kReplyElementsMax - elements_) {
      return Fail(error_, "too many elements in reply");
    }
    elements_ += elements;
    if (out) {
      // Only in the second pass, over input known to hold every element.
      Reset(out, type);
      out->elements.resize(elements);
    }
    for (size_t i = 0; i < elements; ++i) {
      const ParseResult result = Parse(out ? &out->elements[i] : nullptr, depth + 1);
      if (result != ParseResult::kOk) return result;
    }
    return ParseResult::kOk;
  }

  std::string_view in_;
  std::string* error_;
  size_t pos_ = 0;
  size_t elements_ = 0;  // sum of the aggregate lengths seen so far
};

// --- Writing. ------------------------------------------------------------------------

// Appends "<type><n>\r\n" without snprintf.
void AppendHeader(std::string* out, char type, int64_t n) {
  char buf[24];
  buf[0] = type;
  char* end = std::to_chars(buf + 1, buf + sizeof(buf) - 2, n).ptr;
  end[0] = '\r';
  end[1] = '\n';
  out->append(buf, static_cast<size_t>(end + 2 - buf));
}

void AppendCount(std::string* out, char type, size_t n) {
  assert(n <= static_cast<size_t>(kInt64Max));
  AppendHeader(out, type, static_cast<int64_t>(n));
}

// Appends "<type><text>\r\n" with any CR or LF in text turned into a space.
void AppendLine(std::string* out, char type, std::string_view text) {
  out->push_back(type);
  const size_t start = out->size();
  out->append(text);
  if (text.find_first_of("\r\n") != std::string_view::npos) {
    std::replace_if(out->begin() + static_cast<std::ptrdiff_t>(start), out->end(),
                    [](char c) { return c == '\r' || c == '\n'; }, ' ');
  }
  out->append("\r\n", 2);
}

void AppendBulk(std::string* out, std::string_view s) {
  AppendCount(out, '$', s.size());
  out->append(s);
  out->append("\r\n", 2);
}

}  // namespace

ParseResult ParseRequest(std::string_view in, std::vector<std::string_view>* args,
                         size_t* consumed, std::string* error) {
  args->clear();
  *consumed = 0;
  if (in.empty()) return ParseResult::kIncomplete;
  const ParseResult result = in[0] == '*' ? ParseMultibulk(in, args, consumed, error)
                                          : ParseInline(in, args, consumed, error);
  if (result != ParseResult::kOk) args->clear();
  return result;
}

void AppendCommand(std::string* out, const std::vector<std::string_view>& args) {
  AppendCount(out, '*', args.size());
  for (std::string_view arg : args) AppendBulk(out, arg);
}

void ReplyWriter::SimpleString(std::string_view s) { AppendLine(out_, '+', s); }

void ReplyWriter::Error(std::string_view text) { AppendLine(out_, '-', text); }

void ReplyWriter::Error(const Status& status) {
  assert(!status.ok());
  AppendLine(out_, '-', status.ToString());
}

void ReplyWriter::Integer(int64_t v) { AppendHeader(out_, ':', v); }

void ReplyWriter::Bulk(std::string_view s) { AppendBulk(out_, s); }

void ReplyWriter::Null() {
  if (protover_ >= 3) {
    out_->append("_\r\n", 3);
  } else {
    out_->append("$-1\r\n", 5);
  }
}

void ReplyWriter::NullArray() {
  if (protover_ >= 3) {
    out_->append("_\r\n", 3);
  } else {
    out_->append("*-1\r\n", 5);
  }
}

void ReplyWriter::ArrayHeader(size_t n) { AppendCount(out_, '*', n); }

void ReplyWriter::MapHeader(size_t n) {
  if (protover_ >= 3) {
    AppendCount(out_, '%', n);
  } else {
    AppendCount(out_, '*', n * 2);
  }
}

void ReplyWriter::Boolean(bool b) {
  if (protover_ >= 3) {
    out_->append(b ? "#t\r\n" : "#f\r\n", 4);
  } else {
    out_->append(b ? ":1\r\n" : ":0\r\n", 4);
  }
}

const Value* Value::Find(std::string_view key) const {
  if (type != Type::kMap && type != Type::kArray) return nullptr;
  for (size_t i = 0; i + 1 < elements.size(); i += 2) {
    const Value& k = elements[i];
    const bool is_text = k.type == Type::kBulk || k.type == Type::kSimple || k.type == Type::kVerbatim;
    if (is_text && k.str == key) return &elements[i + 1];
  }
  return nullptr;
}

Status Value::ToStatus() const {
  if (type != Type::kError) return Status::Ok();
  const std::string_view text = str;
  const size_t space = text.find(' ');
  const std::string_view word = text.substr(0, space);
  const StatusCode code = StatusCodeFromWire(word);
  if (StatusCodeName(code) != word) return Status(StatusCode::kErr, str);
  const std::string_view message =
      space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  return Status(code, std::string(message));
}

ParseResult ParseReply(std::string_view in, Value* out, size_t* consumed,
                       std::string* error) {
  *consumed = 0;
  // Nothing past kReplyBytesMax is looked at: a reply that needs more is too big.
  const std::string_view view = in.substr(0, limits::kReplyBytesMax);
  ReplyParser validate(view, error);
  const ParseResult result = validate.Parse(nullptr, 0);
  if (result == ParseResult::kIncomplete && in.size() > view.size()) {
    return Fail(error, "too big reply");
  }
  if (result != ParseResult::kOk) return result;
  ReplyParser build(view, error);
  const ParseResult built = build.Parse(out, 0);
  assert(built == ParseResult::kOk);
  assert(build.pos() == validate.pos());
  (void)built;
  *consumed = validate.pos();
  return ParseResult::kOk;
}

}  // namespace tumbler::protocol
