// The pure parts of the zookeeper:// backend (zookeeper.cc): its URL, how a
// lock name becomes one znode path component, and how a lock node's name is
// read back. Header-only so that zookeeper_test.cc can check them directly.
//
// Layout in ZooKeeper (docs/backends.md, "zookeeper://"):
//
//   <root>                       persistent, default /tumbler
//   <root>/locks                 persistent
//   <root>/locks/<escaped name>  container: the server removes it once its
//                                last child is gone
//   <root>/locks/<escaped name>/<client>-<attempt>-lock-0000000042
//                                ephemeral sequential: one per holder or
//                                waiter; "-read-" instead of "-lock-" for a
//                                shared (reader) request
//
// The 10-digit suffix is the sequence number ZooKeeper appends: it orders the
// queue of one lock. The part before "-lock-" is unique per acquire attempt so
// that a create whose reply was lost can be found again (or cleaned up).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/limits.h"
#include "tumbler/status.h"

namespace tumbler::client::zk {

inline constexpr std::string_view kDefaultRoot = "/tumbler";
inline constexpr int kDefaultPort = 2181;
// Bounds on the URL: hosts in the connect string, bytes of the root path.
inline constexpr size_t kHostsMax = 64;
inline constexpr size_t kRootBytesMax = 512;
// The sequence number ZooKeeper appends to a sequential node: "%010d".
inline constexpr size_t kSequenceDigits = 10;
// An escaped lock name: every byte may become "%XX".
inline constexpr size_t kEscapedNameBytesMax = 3 * limits::kLockNameBytesMax;

struct Url {
  std::string hosts;  // the C client's connect string "h1:p1,h2:p2"
  std::string root;   // "/tumbler"
};

namespace detail {

inline bool IsPlainByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

inline int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

inline Status BadUrl(std::string_view url, const std::string& why) {
  return Status(StatusCode::kInvalidArgument,
                "bad zookeeper:// URL \"" + std::string(url) + "\": " + why);
}

// "host:port", "host" (port 2181) or "[v6addr]:port" -> "host:port".
inline std::optional<std::string> NormalizeHost(std::string_view host, std::string* why) {
  if (host.empty()) {
    *why = "empty host in the host list";
    return std::nullopt;
  }
  std::string_view name = host;
  std::string_view port;
  if (host.front() == '[') {
    size_t close = host.find(']');
    if (close == std::string_view::npos || close == 1) {
      *why = "unterminated or empty [IPv6] host \"" + std::string(host) + "\"";
      return std::nullopt;
    }
    name = host.substr(0, close + 1);
    std::string_view rest = host.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        *why = "junk after \"]\" in \"" + std::string(host) + "\"";
        return std::nullopt;
      }
      port = rest.substr(1);
      if (port.empty()) {
        *why = "empty port in \"" + std::string(host) + "\"";
        return std::nullopt;
      }
    }
  } else {
    size_t colon = host.rfind(':');
    if (colon != std::string_view::npos) {
      name = host.substr(0, colon);
      port = host.substr(colon + 1);
      if (port.empty()) {
        *why = "empty port in \"" + std::string(host) + "\"";
        return std::nullopt;
      }
    }
    if (name.empty()) {
      *why = "empty host name in \"" + std::string(host) + "\"";
      return std::nullopt;
    }
    for (unsigned char c : name) {
      if (!IsPlainByte(c)) {
        *why = "invalid character in host \"" + std::string(host) + "\"";
        return std::nullopt;
      }
    }
  }
  int port_number = kDefaultPort;
  if (!port.empty()) {
    if (port.size() > 5) {
      *why = "port out of range in \"" + std::string(host) + "\"";
      return std::nullopt;
    }
    port_number = 0;
    for (char c : port) {
      if (c < '0' || c > '9') {
        *why = "port is not a number in \"" + std::string(host) + "\"";
        return std::nullopt;
      }
      port_number = port_number * 10 + (c - '0');
    }
    if (port_number < 1 || port_number > 65535) {
      *why = "port out of range in \"" + std::string(host) + "\"";
      return std::nullopt;
    }
  }
  return std::string(name) + ":" + std::to_string(port_number);
}

}  // namespace detail

// Parses "zookeeper://host[:port][,host[:port]...][/root/path]" (scheme case
// insensitive; port 2181 when omitted; IPv6 hosts in brackets). The root is
// one or more components of [A-Za-z0-9._-], none "." or "..", not under
// /zookeeper (the server's own tree). Errors: kInvalidArgument naming what is
// wrong.
inline Result<Url> ParseUrl(std::string_view url) {
  constexpr std::string_view kScheme = "zookeeper://";
  if (url.size() < kScheme.size()) return detail::BadUrl(url, "does not start with zookeeper://");
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = url[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return detail::BadUrl(url, "does not start with zookeeper://");
  }
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find_first_of("?#@") != std::string_view::npos) {
    return detail::BadUrl(url, "query strings, fragments and user@ are not supported");
  }
  size_t slash = rest.find('/');
  std::string_view host_list = rest.substr(0, slash);
  Url out;
  out.root = std::string(kDefaultRoot);
  if (slash != std::string_view::npos) {
    std::string_view root = rest.substr(slash);
    if (root.size() > kRootBytesMax) {
      return detail::BadUrl(url, "root path longer than " + std::to_string(kRootBytesMax) + " bytes");
    }
    if (root == "/") return detail::BadUrl(url, "empty root path (omit it for /tumbler)");
    if (root.back() == '/') return detail::BadUrl(url, "root path ends with /");
    size_t start = 1;
    while (start <= root.size()) {
      size_t end = root.find('/', start);
      if (end == std::string_view::npos) end = root.size();
      std::string_view part = root.substr(start, end - start);
      if (part.empty()) return detail::BadUrl(url, "empty component in the root path");
      if (part == "." || part == "..") return detail::BadUrl(url, "\".\" or \"..\" in the root path");
      for (unsigned char c : part) {
        if (!detail::IsPlainByte(c)) {
          return detail::BadUrl(url, "root path may only use A-Z a-z 0-9 . _ - and /");
        }
      }
      if (start == 1 && part == "zookeeper") {
        return detail::BadUrl(url, "the root path may not be under /zookeeper");
      }
      start = end + 1;
    }
    out.root = std::string(root);
  }
  if (host_list.empty()) return detail::BadUrl(url, "no host");
  size_t count = 0;
  size_t start = 0;
  while (start <= host_list.size()) {
    size_t end = host_list.find(',', start);
    if (end == std::string_view::npos) end = host_list.size();
    if (++count > kHostsMax) {
      return detail::BadUrl(url, "more than " + std::to_string(kHostsMax) + " hosts");
    }
    std::string why;
    std::optional<std::string> host = detail::NormalizeHost(host_list.substr(start, end - start), &why);
    if (!host) return detail::BadUrl(url, why);
    if (!out.hosts.empty()) out.hosts += ',';
    out.hosts += *host;
    start = end + 1;
  }
  return out;
}

// A lock name (1..1024 arbitrary bytes) as one path component. ZooKeeper
// refuses '/', the components "." and "..", NUL, control characters and some
// Unicode ranges, so every byte outside [A-Za-z0-9_-] (and '.' when the whole
// name is dots) becomes %XX. At most kEscapedNameBytesMax bytes; injective, so
// two names never share a lock node.
inline std::string EscapeName(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const bool all_dots = name.find_first_not_of('.') == std::string_view::npos;
  std::string out;
  out.reserve(name.size());
  for (unsigned char c : name) {
    if (detail::IsPlainByte(c) && !(c == '.' && all_dots)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

// The inverse of EscapeName; nullopt if `component` is not an escaped name.
inline std::optional<std::string> UnescapeName(std::string_view component) {
  if (component.size() > kEscapedNameBytesMax) return std::nullopt;
  std::string out;
  out.reserve(component.size());
  for (size_t i = 0; i < component.size(); ++i) {
    char c = component[i];
    if (c != '%') {
      if (!detail::IsPlainByte(static_cast<unsigned char>(c))) return std::nullopt;
      out += c;
      continue;
    }
    if (i + 2 >= component.size()) return std::nullopt;
    int hi = detail::HexValue(component[i + 1]);
    int lo = detail::HexValue(component[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

// A child of a lock's folder, as the queue sees it.
struct QueueNode {
  int64_t sequence = 0;  // the suffix ZooKeeper appended
  bool shared = false;   // a reader ("-read-" before the suffix)
};

// Reads "<anything>-lock-0000000042" / "<anything>-read-0000000042". A child
// with any other 10-digit suffix (another client's recipe, e.g. Curator's
// "_c_<uuid>-lock-" or "__WRIT__") counts as an exclusive request, which is
// the safe reading; a child without one is not part of the queue (nullopt).
inline std::optional<QueueNode> ParseQueueNode(std::string_view child) {
  if (child.size() < kSequenceDigits) return std::nullopt;
  std::string_view digits = child.substr(child.size() - kSequenceDigits);
  int64_t sequence = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    sequence = sequence * 10 + (c - '0');
  }
  std::string_view head = child.substr(0, child.size() - kSequenceDigits);
  constexpr std::string_view kRead = "-read-";
  bool shared = head.size() >= kRead.size() && head.substr(head.size() - kRead.size()) == kRead;
  return QueueNode{sequence, shared};
}

}  // namespace tumbler::client::zk
