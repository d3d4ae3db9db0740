// The `tumbler` binary against a real tumblerd: output, exit codes, `run`.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/test_server.h"

#ifndef TUMBLER_CLI_PATH
#define TUMBLER_CLI_PATH "tumbler"
#endif

namespace tumbler {
namespace {

using namespace std::chrono_literals;
using client::testing::TestServer;
using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One run of the CLI, started in the background.
class Cli {
 public:
  Cli(const std::vector<std::string>& args, const std::string& server_url) {
    char tmpl[] = "/tmp/tumbler-cli-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    std::vector<std::string> argv = {TUMBLER_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string out = dir_ + "/out", err = dir_ + "/err";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setenv("TUMBLER_SERVER", server_url.c_str(), 1);
      int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, STDOUT_FILENO);
      ::dup2(e, STDERR_FILENO);
      std::vector<char*> cargv;
      for (std::string& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      ::execv(cargv[0], cargv.data());
      ::_exit(99);
    }
  }
  ~Cli() {
    if (pid_ > 0 && !done_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::string cmd = "rm -rf " + dir_;
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }

  pid_t pid() const { return pid_; }
  // Waits for exit; returns the exit code (128+N if killed by N), -1 on timeout.
  int Wait(Clock::duration timeout = 30s) {
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        done_ = true;
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return code_;
      }
      std::this_thread::sleep_for(5ms);
    }
    return -1;
  }
  std::string out() const { return ReadFile(dir_ + "/out"); }
  std::string err() const { return ReadFile(dir_ + "/err"); }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  bool done_ = false;
  int code_ = -1;
};

struct Ran {
  int code;
  std::string out;
  std::string err;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestServer::BinaryPath().empty()) GTEST_SKIP() << "no tumblerd binary (set TUMBLERD)";
    Status status = server_.Start();
    ASSERT_TRUE(status.ok()) << status.ToString();
  }

  Ran Run(const std::vector<std::string>& args) {
    Cli cli(args, server_.url());
    int code = cli.Wait();
    return {code, cli.out(), cli.err()};
  }

  std::string Trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  TestServer server_;
};

TEST_F(CliTest, HelpAndUsage) {
  Ran help = Run({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("Exit codes"), std::string::npos);
  for (const char* command : {"lock", "unlock", "run", "session", "inspect", "locks", "sessions",
                              "info", "check"}) {
    Ran r = Run({command, "--help"});
    EXPECT_EQ(r.code, 0) << command;
    EXPECT_NE(r.out.find("usage: tumbler"), std::string::npos) << command;
  }
  EXPECT_EQ(Run({}).code, 2);
  EXPECT_EQ(Run({"frobnicate"}).code, 2);
  EXPECT_EQ(Run({"lock"}).code, 2);
  EXPECT_EQ(Run({"lock", "x", "--wait", "10"}).code, 2);  // no unit
  EXPECT_EQ(Run({"lock", "x", "--bogus"}).code, 2);
  EXPECT_EQ(Run({"unlock", "x"}).code, 2);  // --session missing
  EXPECT_EQ(Run({"run", "--lock", "x"}).code, 125);  // no command
}

TEST_F(CliTest, UnreachableServerIsExit3) {
  Ran r = Run({"--server", "tumbler://127.0.0.1:" + std::to_string(client::testing::FreePort()),
               "--timeout", "300ms", "info"});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("UNAVAILABLE"), std::string::npos) << r.err;
}

TEST_F(CliTest, SessionLockUnlockCycle) {
  Ran open = Run({"session", "open", "--ttl", "30s", "--name", "cli-test"});
  ASSERT_EQ(open.code, 0) << open.err;
  std::string session = Trim(open.out);
  ASSERT_FALSE(session.empty());

  Ran lock = Run({"lock", "jobs/1", "--session", session});
  ASSERT_EQ(lock.code, 0) << lock.err;
  std::string token = Trim(lock.out);
  EXPECT_GT(std::stoull(token), 0u);  // the token alone on its line

  // Another holder (same session, other owner) cannot have it.
  auto start = Clock::now();
  Ran busy = Run({"lock", "jobs/1", "--session", session, "--owner", "b", "--wait", "300ms"});
  EXPECT_EQ(busy.code, 1);
  EXPECT_GE(Clock::now() - start, 300ms);
  EXPECT_EQ(Run({"lock", "jobs/1", "--session", session, "--owner", "b", "--wait", "0"}).code, 1);

  Ran check = Run({"check", "jobs/1", token});
  EXPECT_EQ(check.code, 0);
  EXPECT_EQ(Trim(check.out), "1");
  EXPECT_EQ(Run({"check", "jobs/1", "999999"}).code, 1);

  Ran inspect = Run({"inspect", "jobs/1"});
  EXPECT_EQ(inspect.code, 0);
  EXPECT_NE(inspect.out.find("exclusive"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("session " + session), std::string::npos) << inspect.out;

  Ran locks = Run({"locks", "--match", "jobs/"});
  EXPECT_EQ(locks.code, 0);
  EXPECT_EQ(locks.out, "jobs/1\n");
  Ran sessions = Run({"sessions"});
  EXPECT_EQ(sessions.code, 0);
  EXPECT_NE(sessions.out.find(session + "\n"), std::string::npos);
  Ran info = Run({"session", "info", session});
  EXPECT_EQ(info.code, 0);
  EXPECT_NE(info.out.find("cli-test"), std::string::npos) << info.out;
  EXPECT_EQ(Run({"session", "keepalive", session}).code, 0);

  Ran unlock = Run({"unlock", "jobs/1", "--session", session});
  EXPECT_EQ(unlock.code, 0) << unlock.err;
  EXPECT_EQ(Run({"unlock", "jobs/1", "--session", session}).code, 1);  // not held

  EXPECT_EQ(Run({"session", "close", session}).code, 0);
  EXPECT_EQ(Run({"session", "keepalive", session}).code, 4);
  EXPECT_EQ(Run({"lock", "jobs/1", "--session", session}).code, 4);
}

TEST_F(CliTest, LockWithItsOwnSession) {
  Ran lock = Run({"lock", "lease", "--ttl", "30s"});
  ASSERT_EQ(lock.code, 0) << lock.err;
  EXPECT_GT(std::stoull(Trim(lock.out)), 0u);
  EXPECT_NE(lock.err.find("session"), std::string::npos);
  // Still held after the CLI exited: the session lives on for its TTL.
  EXPECT_EQ(Run({"lock", "lease", "--wait", "0"}).code, 1);
}

TEST_F(CliTest, InfoPrintsServerFacts) {
  Ran info = Run({"info"});
  EXPECT_EQ(info.code, 0);
  EXPECT_NE(info.out.find("role:"), std::string::npos) << info.out;
}

TEST_F(CliTest, RunPassesTheTokenAndTheExitCode) {
  Ran r = Run({"run", "--lock", "job", "--",
               "sh", "-c", "echo $TUMBLER_LOCK $TUMBLER_TOKEN $TUMBLER_SESSION; exit 7"});
  EXPECT_EQ(r.code, 7) << r.err;
  std::istringstream words(r.out);
  std::string lock, token, session;
  words >> lock >> token >> session;
  EXPECT_EQ(lock, "job");
  EXPECT_GT(std::stoull(token), 0u);
  EXPECT_GT(std::stoull(session), 0u);
  // Released afterwards.
  Ran inspect = Run({"inspect", "job"});
  EXPECT_NE(inspect.out.find("free"), std::string::npos) << inspect.out;
}

TEST_F(CliTest, RunHoldsTheLockWhileTheCommandRuns) {
  Cli running({"run", "--lock", "held", "--", "sleep", "30"}, server_.url());
  // Wait until it holds the lock.
  auto deadline = Clock::now() + 10s;
  while (Clock::now() < deadline &&
         Run({"inspect", "held"}).out.find("exclusive") == std::string::npos) {
    std::this_thread::sleep_for(20ms);
  }
  std::string marker = "/tmp/tumbler-cli-test-marker-" + std::to_string(::getpid());
  ::unlink(marker.c_str());
  Ran blocked = Run({"run", "--lock", "held", "--wait", "200ms", "--", "touch", marker});
  EXPECT_EQ(blocked.code, 124) << blocked.err;
  EXPECT_NE(::access(marker.c_str(), F_OK), 0) << "the command must not run";
  // SIGTERM to tumbler reaches the command; its status comes back.
  ::kill(running.pid(), SIGTERM);
  EXPECT_EQ(running.Wait(5s), 128 + SIGTERM);
  Ran inspect = Run({"inspect", "held"});
  EXPECT_NE(inspect.out.find("free"), std::string::npos) << inspect.out;
}

TEST_F(CliTest, RunReportsCommandFailures) {
  EXPECT_EQ(Run({"run", "--lock", "x", "--", "no-such-command-tumbler"}).code, 127);
  std::string not_executable = "/tmp/tumbler-cli-test-noexec-" + std::to_string(::getpid());
  std::ofstream(not_executable) << "data\n";
  ::chmod(not_executable.c_str(), 0644);
  EXPECT_EQ(Run({"run", "--lock", "x", "--", not_executable}).code, 126);
  ::unlink(not_executable.c_str());
  EXPECT_EQ(Run({"run", "--lock", "x", "--", "sh", "-c", "kill -KILL $$"}).code, 128 + SIGKILL);
}

TEST_F(CliTest, RunEndsTheCommandWhenTheSessionIsLost) {
  std::string marker = "/tmp/tumbler-cli-test-term-" + std::to_string(::getpid());
  ::unlink(marker.c_str());
  Cli running({"run", "--lock", "doomed", "--ttl", "1s", "--timeout", "500ms", "--", "sh", "-c",
               "trap 'touch " + marker + "; exit 0' TERM; while true; do sleep 0.05; done"},
              server_.url());
  auto deadline = Clock::now() + 10s;
  while (Clock::now() < deadline &&
         Run({"inspect", "doomed"}).out.find("exclusive") == std::string::npos) {
    std::this_thread::sleep_for(20ms);
  }
  server_.Kill();
  auto killed = Clock::now();
  EXPECT_EQ(running.Wait(10s), 122) << running.err();
  EXPECT_LT(Clock::now() - killed, 4s);
  EXPECT_EQ(::access(marker.c_str(), F_OK), 0) << "the command must get SIGTERM";
  EXPECT_NE(running.err().find("SIGTERM"), std::string::npos) << running.err();
  ::unlink(marker.c_str());
}

}  // namespace
}  // namespace tumbler
