#include "backend.h"

#include <charconv>

namespace tumbler::bench {

Result<Endpoint> ParseEndpoint(std::string_view url) {
  Endpoint e;
  e.url = std::string(url);
  e.label = e.url;
  std::string_view rest;
  // The client library's schemes (include/tumbler/backends.h); this library
  // does not link the client, so they are listed here.
  constexpr std::string_view kLibrarySchemes[] = {"tumbler://", "redis://",     "redlock://",
                                                  "etcd://",    "zookeeper://", "postgres://",
                                                  "mysql://"};
  std::string_view library_url = url.starts_with("lib:") ? url.substr(4) : url;
  if (url.starts_with("lib:") ||
      (!url.starts_with("tumbler://") && !url.starts_with("redis://"))) {
    for (std::string_view scheme : kLibrarySchemes) {
      if (library_url.starts_with(scheme)) {
        e.backend = Backend::kLibrary;
        e.url = std::string(library_url);
        return e;
      }
    }
    return Status(StatusCode::kInvalidArgument,
                  "endpoint '" + e.url +
                      "': expected tumbler://, redis://, or a client-library URL (etcd://, "
                      "zookeeper://, postgres://, mysql://, redlock://, lib:redis://, "
                      "lib:tumbler://)");
  }
  if (url.starts_with("tumbler://") && url.find(',') != std::string_view::npos) {
    std::string_view list = url.substr(10);
    while (!list.empty()) {
      size_t comma = list.find(',');
      auto node = ParseEndpoint("tumbler://" + std::string(list.substr(0, comma)));
      if (!node.ok()) return node.status();
      e.nodes.emplace_back(node->host, node->port);
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    e.backend = Backend::kTumbler;
    e.host = e.nodes.front().first;
    e.port = e.nodes.front().second;
    return e;
  }
  if (url.starts_with("tumbler://")) {
    e.backend = Backend::kTumbler;
    e.port = 7420;
    rest = url.substr(10);
  } else if (url.starts_with("redis://")) {
    e.backend = Backend::kRedis;
    e.port = 6379;
    rest = url.substr(8);
  } else {
    return Status(StatusCode::kInvalidArgument,
                  "endpoint '" + e.url + "': expected tumbler://host:port or redis://host:port");
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  std::string_view host = rest;
  if (rest.starts_with('[')) {  // [::1]:port
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      return Status(StatusCode::kInvalidArgument, "endpoint '" + e.url + "': unclosed '['");
    }
    host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') {
      return Status(StatusCode::kInvalidArgument, "endpoint '" + e.url + "': bad port");
    }
  } else {
    const size_t colon = rest.rfind(':');
    host = colon == std::string_view::npos ? rest : rest.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon);
  }
  if (host.empty()) {
    return Status(StatusCode::kInvalidArgument, "endpoint '" + e.url + "': no host");
  }
  e.host = std::string(host);
  if (!rest.empty()) {
    const std::string_view digits = rest.substr(1);
    unsigned port = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || port == 0 ||
        port > 65535) {
      return Status(StatusCode::kInvalidArgument, "endpoint '" + e.url + "': bad port");
    }
    e.port = static_cast<uint16_t>(port);
  }
  return e;
}

void EncodeCommand(std::string* out, std::initializer_list<std::string_view> args) {
  char number[24];
  auto append_number = [&](char prefix, size_t n) {
    out->push_back(prefix);
    auto [end, ec] = std::to_chars(number, number + sizeof(number), n);
    out->append(number, end);
    out->append("\r\n");
  };
  append_number('*', args.size());
  for (std::string_view arg : args) {
    append_number('$', arg.size());
    out->append(arg);
    out->append("\r\n");
  }
}

void Dialect::EncodeSetup(std::string* out) const {
  if (backend_ == Backend::kTumbler) {
    EncodeCommand(out, {"SESSION", "OPEN", std::to_string(ttl_ms_)});
  } else {
    EncodeCommand(out, {"SCRIPT", "LOAD", kRedisUnlockScript});
  }
}

Status Dialect::AcceptSetup(const ReplyView& reply) {
  if (backend_ == Backend::kTumbler) {
    if (reply.kind != ReplyView::Kind::kInteger || reply.integer <= 0) {
      return Status(StatusCode::kProtocol, "SESSION OPEN answered " + DescribeReply(reply));
    }
    session_id_ = reply.integer;
    session_text_ = std::to_string(session_id_);
    return Status::Ok();
  }
  if (reply.kind != ReplyView::Kind::kBulk || reply.text.size() != 40) {
    return Status(StatusCode::kProtocol, "SCRIPT LOAD answered " + DescribeReply(reply));
  }
  script_sha_ = std::string(reply.text);
  return Status::Ok();
}

void Dialect::EncodeLock(std::string* out, std::string_view name,
                         std::string_view owner_token, int64_t wait_ms) const {
  if (backend_ == Backend::kTumbler) {
    if (wait_ms < 0) {
      EncodeCommand(out, {"LOCK", name, session_text_});
    } else {
      EncodeCommand(out, {"LOCK", name, session_text_, "WAIT", std::to_string(wait_ms)});
    }
    return;
  }
  EncodeCommand(out, {"SET", name, owner_token, "NX", "PX", std::to_string(ttl_ms_)});
}

void Dialect::EncodeUnlock(std::string* out, std::string_view name,
                           std::string_view owner_token) const {
  if (backend_ == Backend::kTumbler) {
    EncodeCommand(out, {"UNLOCK", name, session_text_});
    return;
  }
  EncodeCommand(out, {"EVALSHA", script_sha_, "1", name, owner_token});
}

bool Dialect::EncodeTeardown(std::string* out) const {
  if (backend_ != Backend::kTumbler || session_id_ == 0) return false;
  EncodeCommand(out, {"SESSION", "CLOSE", session_text_});
  return true;
}

LockOutcome Dialect::ClassifyLock(const ReplyView& reply) const {
  if (reply.kind == ReplyView::Kind::kNull) return LockOutcome::kBusy;
  if (backend_ == Backend::kTumbler) {
    return reply.kind == ReplyView::Kind::kArray && reply.has_first_integer
               ? LockOutcome::kGranted
               : LockOutcome::kFailed;
  }
  return reply.kind == ReplyView::Kind::kSimple && reply.text == "OK" ? LockOutcome::kGranted
                                                                      : LockOutcome::kFailed;
}

Status Dialect::CheckUnlock(const ReplyView& reply) const {
  // tumbler: hold count left, 0 = released (the bench never re-enters).
  // redis: the script returns the number of keys deleted, 1 = released.
  const int64_t expected = backend_ == Backend::kTumbler ? 0 : 1;
  if (reply.kind == ReplyView::Kind::kInteger && reply.integer == expected) {
    return Status::Ok();
  }
  std::string what = "unlock answered " + DescribeReply(reply);
  if (backend_ == Backend::kRedis && reply.kind == ReplyView::Kind::kInteger) {
    what += " (the key expired or changed hands: is --ttl shorter than a hold?)";
  }
  return Status(StatusCode::kProtocol, what);
}

std::string DescribeReply(const ReplyView& reply) {
  switch (reply.kind) {
    case ReplyView::Kind::kSimple: return "+" + std::string(reply.text);
    case ReplyView::Kind::kError: return "-" + std::string(reply.text);
    case ReplyView::Kind::kInteger: return ":" + std::to_string(reply.integer);
    case ReplyView::Kind::kBulk:
      return "bulk \"" + std::string(reply.text.substr(0, 80)) + "\"";
    case ReplyView::Kind::kNull: return "null";
    case ReplyView::Kind::kArray:
      return "array of " + std::to_string(reply.integer);
  }
  return "?";
}

}  // namespace tumbler::bench
