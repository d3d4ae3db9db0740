// The backends over other systems, one file each (redis.cc, redlock.cc,
// etcd.cc, zookeeper.cc, postgres.cc, mysql.cc), and the registry that picks
// one by URL scheme (registry.cc). Each file defines its BackendInfo (the
// capability declaration docs/backends.md is generated from) and its factory.
//
// A factory parses its URL (kInvalidArgument naming what is wrong), checks the
// options only it uses (MakeBackend has checked the shared ones with
// ClientState::ValidateOptions), and returns a backend that is not yet opened: the
// caller runs Open() (connect, open the session or lease) and then the
// watchdog thread (backend.h).
#pragma once

#include <memory>
#include <string_view>

#include "client/backend.h"

namespace tumbler::client {

const BackendInfo& TumblerBackendInfo();  // client_state.cc

const BackendInfo& RedisBackendInfo();
Result<std::shared_ptr<Backend>> MakeRedisBackend(std::string_view url,
                                                  const ClientOptions& options);

const BackendInfo& RedlockBackendInfo();
Result<std::shared_ptr<Backend>> MakeRedlockBackend(std::string_view url,
                                                    const ClientOptions& options);

const BackendInfo& EtcdBackendInfo();
Result<std::shared_ptr<Backend>> MakeEtcdBackend(std::string_view url,
                                                 const ClientOptions& options);

const BackendInfo& ZooKeeperBackendInfo();
Result<std::shared_ptr<Backend>> MakeZooKeeperBackend(std::string_view url,
                                                      const ClientOptions& options);

const BackendInfo& PostgresBackendInfo();
Result<std::shared_ptr<Backend>> MakePostgresBackend(std::string_view url,
                                                     const ClientOptions& options);

const BackendInfo& MySqlBackendInfo();
Result<std::shared_ptr<Backend>> MakeMySqlBackend(std::string_view url,
                                                  const ClientOptions& options);

}  // namespace tumbler::client
