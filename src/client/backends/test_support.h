// Test support for the backend tests: real servers started by
// tests/backends/servers/<scheme>.sh and stopped by PID, and the `tumbler`
// CLI as a second process.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "tumbler/client.h"
#include "tumbler/status.h"

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
  // Run after the last Stop(), before dir_ is removed: `<scheme>.sh --cleanup
  // DIR`, when the script printed CLEANUP=1 (postgres.sh: the shared memory a
  // killed server leaves behind).
  std::string cleanup_;
};

// A second process holding a lock: `tumbler --server URL run --lock NAME
// --ttl TTL -- <a command that marks a file and sleeps>`, in a process group
// of its own (the CLI and its command). Used to kill -9 or SIGSTOP a holder.
// The destructor kills and reaps it if it still runs.
class HolderProcess {
 public:
  HolderProcess() = default;
  ~HolderProcess();
  HolderProcess(const HolderProcess&) = delete;
  HolderProcess& operator=(const HolderProcess&) = delete;

  // Starts it and waits until its command runs, i.e. the CLI holds the lock.
  // Errors: kUnavailable (fork failed), kTimeout (no grant within `timeout`).
  Status Start(const std::string& url, const std::string& name, std::chrono::milliseconds ttl,
               std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Sends `signal` to the CLI and its command.
  void Signal(int signal);
  // SIGKILLs them and reaps the CLI: gone when this returns. Idempotent.
  void Kill();

 private:
  pid_t pid_ = -1;
  std::string marker_;
};

// Records a client's OnSessionLost: whether it ran, and with what. Declare it
// after the client it watches (the client's callback points at it).
class SessionLossWatch {
 public:
  explicit SessionLossWatch(Client& client);
  SessionLossWatch(const SessionLossWatch&) = delete;
  SessionLossWatch& operator=(const SessionLossWatch&) = delete;

  // Waits up to `timeout` for the callback; whether it ran.
  bool WaitLost(std::chrono::milliseconds timeout) const;
  bool lost() const { return lost_.load(); }
  // What the callback was given (OK while it has not run).
  Status why() const;

 private:
  std::atomic<bool> lost_{false};
  mutable std::mutex mu_;
  Status why_;
};

// Runs `command` with /bin/sh and returns what it printed on stdout (all of
// it: wrap a command that may hang in `timeout`). `*exit_status`, if given,
// gets pclose(3)'s status, or -1 when the command could not be started.
std::string CommandOutput(const std::string& command, int* exit_status = nullptr);

// `base` + "-" + this process's pid + "-" + a counter: a lock or session name
// no other test (process) uses.
std::string UniqueName(const std::string& base);

// Waits up to `timeout` for `pid` (not our child) to exit.
bool WaitGone(pid_t pid, std::chrono::milliseconds timeout);

// The path of the tumbler CLI built beside the tests.
const char* CliPath();
// The repository's top folder.
const char* SourceDir();

}  // namespace tumbler::testing
