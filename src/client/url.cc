#include "client/url.h"

#include <cctype>
#include <charconv>

namespace tumbler::client {
namespace {

Status Invalid(std::string_view what, std::string_view text) {
  std::string message(what);
  message += ": \"";
  message += text;
  message += '"';
  return Status(StatusCode::kInvalidArgument, std::move(message));
}

// Backends the design names (DESIGN.md "The client library"); this client
// speaks only tumbler's own protocol.
constexpr std::string_view kOtherSchemes[] = {"redis",     "rediss",   "redlock",
                                              "etcd",      "zookeeper", "postgres",
                                              "postgresql", "mysql"};

}  // namespace

std::string Endpoint::ToString() const {
  std::string out;
  if (host.find(':') != std::string::npos) {
    out = "[" + host + "]";
  } else {
    out = host;
  }
  out += ':';
  out += std::to_string(port);
  return out;
}

Result<Endpoint> ParseHostPort(std::string_view text) {
  Endpoint endpoint;
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return Invalid("unbalanced '['", text);
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Invalid("expected ':' after ']'", text);
      port = rest.substr(1);
      if (port.empty()) return Invalid("empty port", text);
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon != std::string_view::npos) {
      if (text.find(':') != colon) {
        return Invalid("an IPv6 address needs brackets", text);
      }
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
      if (port.empty()) return Invalid("empty port", text);
    } else {
      host = text;
    }
  }
  if (host.empty()) return Invalid("empty host", text);
  if (host.size() > kHostBytesMax) return Invalid("host name too long", text);
  for (char c : host) {
    if (c == '/' || c == '@' || c == ',' || c == ' ' || c == '[' || c == ']') {
      return Invalid("bad character in host", text);
    }
  }
  endpoint.host.assign(host);
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 ||
        value > 65535) {
      return Invalid("port must be 1..65535", text);
    }
    endpoint.port = static_cast<uint16_t>(value);
  }
  return endpoint;
}

Result<std::vector<Endpoint>> ParseServerUrl(std::string_view url) {
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return Invalid("expected a URL such as tumbler://127.0.0.1:7420", url);
  }
  std::string scheme(url.substr(0, sep));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "tumbler") {
    for (std::string_view other : kOtherSchemes) {
      if (scheme == other) {
        return Status(StatusCode::kUnsupported,
                      scheme + ":// names another lock backend; this needs a tumblerd "
                               "(tumbler://) server (other backends work through "
                               "Client::Connect and `tumbler run`)");
      }
    }
    return Invalid("unknown scheme (expected tumbler://)", url);
  }
  std::string_view rest = url.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty()) return Invalid("no host in URL", url);
  if (rest.find('/') != std::string_view::npos || rest.find('?') != std::string_view::npos) {
    return Invalid("a tumbler:// URL has no path or query", url);
  }
  std::vector<Endpoint> endpoints;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    Result<Endpoint> endpoint = ParseHostPort(item);
    if (!endpoint.ok()) return endpoint.status();
    if (endpoints.size() == kEndpointsMax) return Invalid("too many hosts", url);
    endpoints.push_back(std::move(endpoint).value());
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return endpoints;
}

}  // namespace tumbler::client
