// The backend registry: URL scheme -> backend (backend.h MakeBackend) and the
// capability declarations every backend makes (include/tumbler/backends.h).
#include <array>
#include <cctype>
#include <string>

#include "client/backends/backends.h"
#include "client/client_state.h"
#include "client/url.h"

namespace tumbler {
namespace {

using Factory = Result<std::shared_ptr<client::Backend>> (*)(std::string_view,
                                                            const ClientOptions&);

Result<std::shared_ptr<client::Backend>> MakeTumblerBackend(std::string_view url,
                                                           const ClientOptions& options) {
  Result<std::vector<client::Endpoint>> endpoints = client::ParseServerUrl(url);
  if (!endpoints.ok()) return endpoints.status();
  return std::shared_ptr<client::Backend>(
      std::make_shared<client::ClientState>(std::move(endpoints).value(), options));
}

struct Entry {
  const BackendInfo& (*info)();
  Factory make;
};

const std::array<Entry, 7>& Table() {
  static const std::array<Entry, 7> table = {{
      {client::TumblerBackendInfo, MakeTumblerBackend},
      {client::RedisBackendInfo, client::MakeRedisBackend},
      {client::RedlockBackendInfo, client::MakeRedlockBackend},
      {client::EtcdBackendInfo, client::MakeEtcdBackend},
      {client::ZooKeeperBackendInfo, client::MakeZooKeeperBackend},
      {client::PostgresBackendInfo, client::MakePostgresBackend},
      {client::MySqlBackendInfo, client::MakeMySqlBackend},
  }};
  return table;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::span<const BackendInfo> Backends() {
  static const std::vector<BackendInfo> infos = [] {
    std::vector<BackendInfo> out;
    for (const Entry& e : Table()) out.push_back(e.info());
    return out;
  }();
  return infos;
}

const BackendInfo* FindBackend(std::string_view scheme) {
  std::string lower = Lower(scheme);
  for (const BackendInfo& info : Backends()) {
    if (info.scheme == lower) return &info;
  }
  return nullptr;
}

std::string_view PropertyName(Property property) {
  switch (property) {
    case Property::kMutualExclusion: return "mutual exclusion";
    case Property::kCrashRelease: return "crashed holder released (lease)";
    case Property::kRenewal: return "long critical sections (watchdog renewal)";
    case Property::kBlocking: return "blocking acquire without polling";
    case Property::kTryLock: return "try-lock";
    case Property::kReentrancy: return "reentrancy";
    case Property::kFairness: return "FIFO fairness";
    case Property::kFencing: return "fencing tokens";
    case Property::kSharedMode: return "shared (reader-writer) mode";
    case Property::kNoHerd: return "no herd effect";
    case Property::kDeadlockDetection: return "deadlock detection";
    case Property::kHighAvailability: return "high availability";
    case Property::kDurability: return "durability";
  }
  return "?";
}

namespace client {

Result<std::shared_ptr<Backend>> MakeBackend(std::string_view url, const ClientOptions& options) {
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return Status(StatusCode::kInvalidArgument,
                  "expected a URL such as tumbler://127.0.0.1:7420: \"" + std::string(url) + "\"");
  }
  std::string scheme = Lower(url.substr(0, sep));
  for (const Entry& e : Table()) {
    if (e.info().scheme != scheme) continue;
    // The options every backend shares, checked once for all of them; a
    // factory checks only what is its own.
    if (Status status = ClientState::ValidateOptions(options); !status.ok()) return status;
    return e.make(url, options);
  }
  std::string known;
  for (const Entry& e : Table()) known += (known.empty() ? "" : ", ") + std::string(e.info().scheme) + "://";
  return Status(StatusCode::kUnsupported,
                "no backend for the scheme " + scheme + ":// (known: " + known + ")");
}

}  // namespace client
}  // namespace tumbler
