// Server addresses: the `tumbler://` URL a Client connects to, and the
// `host:port` a `-NOTLEADER` error names (PROTOCOL.md "Error codes").
//
//   tumbler://host[:port][,host[:port]...][/]
//
// A host is a name, an IPv4 address, or an IPv6 address in brackets
// ("[::1]:7420"). The port defaults to 7420. Several hosts name the nodes of
// one cluster; the client starts with the first and follows NOTLEADER.
// Other backends' schemes (redis://, etcd://, ...) are recognised and
// reported as kUnsupported here: this parser is for tumblerd only (the
// backend registry, backends/registry.cc, routes the other schemes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tumbler/status.h"

namespace tumbler::client {

inline constexpr uint16_t kDefaultPort = 7420;
// A URL naming more nodes than this is refused: no cluster is that large.
inline constexpr size_t kEndpointsMax = 16;
inline constexpr size_t kHostBytesMax = 255;

struct Endpoint {
  std::string host;  // without brackets for IPv6
  uint16_t port = kDefaultPort;

  // "host:port", with brackets around an IPv6 host.
  std::string ToString() const;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

// Parses "host", "host:port", "[v6]" or "[v6]:port". Errors: kInvalidArgument
// naming what is wrong (empty host, bad or zero port, unbalanced bracket).
Result<Endpoint> ParseHostPort(std::string_view text);

// Parses a tumbler:// URL into its endpoints, in the order given. Errors:
// kInvalidArgument (not a URL, no hosts, a bad host:port, more than
// kEndpointsMax hosts), kUnsupported (a scheme of another backend).
Result<std::vector<Endpoint>> ParseServerUrl(std::string_view url);

}  // namespace tumbler::client
