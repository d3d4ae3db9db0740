#include "client/backends/test_support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace tumbler::testing {

SessionLossWatch::SessionLossWatch(Client& client) {
  client.OnSessionLost([this](const Status& status) {
    std::lock_guard lock(mu_);
    why_ = status;
    lost_ = true;
  });
}

bool SessionLossWatch::WaitLost(std::chrono::milliseconds timeout) const {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!lost_.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return lost_.load();
}

Status SessionLossWatch::why() const {
  std::lock_guard lock(mu_);
  return why_;
}

std::string CommandOutput(const std::string& command, int* exit_status) {
  FILE* out = ::popen(command.c_str(), "r");
  if (out == nullptr) {
    if (exit_status != nullptr) *exit_status = -1;
    return "";
  }
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), out)) > 0) text.append(buf, n);
  int rc = ::pclose(out);
  if (exit_status != nullptr) *exit_status = rc;
  return text;
}

std::string UniqueName(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

const char* CliPath() { return TUMBLER_CLI_PATH; }
const char* SourceDir() { return TUMBLER_SOURCE_DIR; }

bool WaitGone(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    // A zombie of a process we did not start counts as gone once it is not
    // running any more: read its state.
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (std::getline(stat, line)) {
      size_t close = line.rfind(')');
      if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') {
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

Status HolderProcess::Start(const std::string& url, const std::string& name,
                            std::chrono::milliseconds ttl, std::chrono::milliseconds timeout) {
  static std::atomic<int> counter{0};
  marker_ = "/tmp/tumbler-holder-" + std::to_string(::getpid()) + "-" +
            std::to_string(counter++) + ".held";
  std::filesystem::remove(marker_);
  std::string command = "exec '" + std::string(CliPath()) + "' --server '" + url +
                        "' run --lock '" + name + "' --ttl " + std::to_string(ttl.count()) +
                        "ms -- sh -c 'echo $$ > \"" + marker_ + "\"; exec sleep 60'";
  pid_t pid = ::fork();
  if (pid < 0) return Status(StatusCode::kUnavailable, "fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so that a signal right after Start reaches the group
  pid_ = pid;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(marker_)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(StatusCode::kTimeout, "the holder never ran its command (no grant)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Ok();
}

void HolderProcess::Signal(int signal) {
  if (pid_ > 0) ::kill(-pid_, signal);
}

void HolderProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  ::kill(-pid_, SIGCONT);  // a stopped process dies only once continued
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

HolderProcess::~HolderProcess() {
  Kill();
  if (!marker_.empty()) {
    std::error_code ec;
    std::filesystem::remove(marker_, ec);
  }
}

ExternalServer::ExternalServer(const std::string& scheme) : scheme_(scheme) {
  char pattern[] = "/tmp/tumbler-backend-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    error_ = "mkdtemp failed";
    return;
  }
  dir_ = pattern;
  std::string script = std::string(SourceDir()) + "/tests/backends/servers/" + scheme + ".sh";
  std::string command = "timeout 120 bash '" + script + "' '" + dir_ + "'";
  int rc = 0;
  std::string text = CommandOutput(command, &rc);
  if (rc == -1) {
    error_ = "cannot run " + script;
    return;
  }
  std::istringstream lines(text);
  std::string line, url;
  while (std::getline(lines, line)) {
    if (line.rfind("URL=", 0) == 0) url = line.substr(4);
    if (line == "CLEANUP=1") cleanup_ = "timeout 90 bash '" + script + "' --cleanup '" + dir_ + "'";
    if (line.rfind("PIDS=", 0) == 0) {
      std::istringstream pids(line.substr(5));
      long pid;
      while (pids >> pid) pids_.push_back(static_cast<pid_t>(pid));
    }
  }
  if (rc != 0 || url.empty() || pids_.empty()) {
    error_ = script + " failed (status " + std::to_string(rc) + "), printed: " + text;
    Stop(/*hard=*/true);
    return;
  }
  url_ = url;
}

void ExternalServer::Stop(bool hard) {
  for (pid_t pid : pids_) ::kill(pid, hard ? SIGKILL : SIGTERM);
  for (pid_t pid : pids_) {
    if (!WaitGone(pid, std::chrono::seconds(hard ? 5 : 10))) {
      ::kill(pid, SIGKILL);
      WaitGone(pid, std::chrono::seconds(5));
    }
  }
  pids_.clear();
}

ExternalServer::~ExternalServer() {
  Stop();
  if (!cleanup_.empty()) {
    // What the stopped server left outside dir_ (see CLEANUP= in the script).
    int rc = 0;
    std::string out = CommandOutput(cleanup_ + " 2>&1", &rc);
    if (rc != 0) std::fprintf(stderr, "%s: %s\n", cleanup_.c_str(), out.c_str());
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

}  // namespace tumbler::testing
