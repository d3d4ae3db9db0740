// Test support for the backend tests: real servers started by
// tests/backends/servers/<scheme>.sh and stopped by PID, and the `tumbler`
// CLI as a second process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tumbler::testing {

// One run of tests/backends/servers/<scheme>.sh: the server(s) it started,
// with their data under a fresh temporary folder. The destructor stops them
// (SIGTERM, then SIGKILL after 10 s) and removes the folder.
class ExternalServer {
 public:
  // Starts the servers; on failure url() is empty and error() says why.
  explicit ExternalServer(const std::string& scheme);
  ~ExternalServer();
  ExternalServer(const ExternalServer&) = delete;
  ExternalServer& operator=(const ExternalServer&) = delete;

  bool ok() const { return !url_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& url() const { return url_; }
  const std::string& dir() const { return dir_; }
  const std::vector<pid_t>& pids() const { return pids_; }

  // Stops every server process (SIGKILL if `hard`, else SIGTERM then SIGKILL
  // after 10 s) and waits until they are gone. Idempotent.
  void Stop(bool hard = false);

 private:
  std::string scheme_;
  std::string dir_;
  std::string url_;
  std::string error_;
  std::vector<pid_t> pids_;
};

// Waits up to `timeout` for `pid` (not our child) to exit.
bool WaitGone(pid_t pid, std::chrono::milliseconds timeout);

// The path of the tumbler CLI built beside the tests.
const char* CliPath();
// The repository's top folder.
const char* SourceDir();

}  // namespace tumbler::testing
