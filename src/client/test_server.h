// Test helper: runs a real tumblerd (a separate process) on a free loopback
// port with a temporary data directory, for integration tests of the client
// library and the CLI. Not part of the library.
//
// The binary is found from the TUMBLERD environment variable, else the path
// the build baked in (TUMBLERD_PATH: the tumblerd target of this build, or
// build/tumblerd). Tests GTEST_SKIP() when there is none.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tumbler/status.h"

namespace tumbler::client::testing {

// A loopback port nothing listens on (best effort: it was free a moment ago),
// with port + 100 free too (tumblerd's default raft port), both outside the
// kernel's ephemeral range so that no outgoing connection takes them.
uint16_t FreePort();
// The kernel's ephemeral port range, (first, last).
std::pair<int, int> EphemeralRange();

class TestServer {
 public:
  TestServer() = default;
  // Stops the process (SIGTERM, then SIGKILL) and removes the data directory.
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  // The tumblerd to run, or "" if it does not exist.
  static std::string BinaryPath();

  // Picks a port (first call only), makes the data directory (first call
  // only), starts tumblerd with `extra_flags`, and waits until it answers
  // PING (at most 20 s). Errors: kUnavailable with what went wrong.
  Status Start(const std::vector<std::string>& extra_flags = {});
  // Sends `signal` (SIGKILL, SIGSTOP, SIGCONT, ...) to the process by PID.
  void Signal(int signal);
  // SIGKILL and reap: the process is gone when this returns.
  void Kill();
  // SIGTERM, wait up to 5 s, then SIGKILL; reaps. No-op when not running.
  void Stop();

  // Picks the client port now (Start() uses it); port + 100 is free too, for
  // a raft address. Returns it.
  uint16_t ReservePort() {
    if (port_ == 0) port_ = FreePort();
    return port_;
  }

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  // "tumbler://127.0.0.1:<port>"
  std::string url() const;
  const std::string& data_dir() const { return data_dir_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string data_dir_;
  std::string log_path_;
  std::vector<std::string> flags_;
};

}  // namespace tumbler::client::testing
