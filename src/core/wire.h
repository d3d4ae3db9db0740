// Little-endian fixed-width integers and length-prefixed strings, as used by
// the snapshot (docs/snapshot-format.md) and log entry (docs/log-format.md)
// formats. Internal to src/core.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tumbler::core::wire {

inline void PutU8(std::string* out, uint8_t v) { out->push_back(static_cast<char>(v)); }

inline void PutU16(std::string* out, uint16_t v) {
  char b[2] = {static_cast<char>(v), static_cast<char>(v >> 8)};
  out->append(b, 2);
}

inline void PutU32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 4);
}

inline void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 8);
}

// Overwrites 4 bytes at `offset` (which must already exist) with `v`.
inline void SetU32(std::string* out, size_t offset, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*out)[offset + i] = static_cast<char>(v >> (8 * i));
}

// u16 length, then the bytes. The caller has checked size <= 65535.
inline void PutStr16(std::string* out, std::string_view s) {
  PutU16(out, static_cast<uint16_t>(s.size()));
  out->append(s);
}

// Reads from a byte range. Every getter returns false (and leaves its output
// unspecified) if the input is too short; once a read failed, all later reads
// fail too, so a caller may check only at the end of a group of reads.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  size_t remaining() const { return failed_ ? 0 : in_.size() - pos_; }
  size_t position() const { return pos_; }
  bool failed() const { return failed_; }
  // The failure was a string longer than its bound (else: input too short).
  bool too_long() const { return too_long_; }

  bool U8(uint8_t* v) {
    if (!Need(1)) return false;
    *v = static_cast<uint8_t>(in_[pos_]);
    pos_ += 1;
    return true;
  }
  bool U16(uint16_t* v) {
    uint64_t x;
    if (!Le(2, &x)) return false;
    *v = static_cast<uint16_t>(x);
    return true;
  }
  bool U32(uint32_t* v) {
    uint64_t x;
    if (!Le(4, &x)) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool U64(uint64_t* v) { return Le(8, v); }
  // A u16 length and that many bytes; fails if the length exceeds `max_bytes`.
  bool Str16(std::string_view* v, size_t max_bytes) {
    uint16_t n;
    if (!U16(&n)) return false;
    if (n > max_bytes) {
      too_long_ = true;
      return Fail();
    }
    if (!Need(n)) return false;
    *v = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }

 private:
  bool Fail() {
    failed_ = true;
    return false;
  }
  bool Need(size_t n) {
    if (failed_ || in_.size() - pos_ < n) return Fail();
    return true;
  }
  bool Le(int bytes, uint64_t* v) {
    if (!Need(bytes)) return false;
    uint64_t x = 0;
    for (int i = 0; i < bytes; ++i) {
      x |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + i])) << (8 * i);
    }
    pos_ += bytes;
    *v = x;
    return true;
  }

  std::string_view in_;
  size_t pos_ = 0;
  bool failed_ = false;
  bool too_long_ = false;
};

}  // namespace tumbler::core::wire
