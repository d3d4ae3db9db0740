// tumblerd: a durable lock server. See `tumblerd --help` and docs/.
#include <uv.h>

#include <cstdio>
#include <cstdlib>

#include "server/config.h"
#include "server/log.h"
#include "server/server.h"

int main(int argc, char** argv) {
  using tumbler::server::Config;
  Config config;
  bool exit_now = false;
  tumbler::Status st = tumbler::server::ParseFlags(argc, argv, &config, &exit_now);
  if (!st.ok()) {
    fprintf(stderr, "tumblerd: %s\n", st.message().c_str());
    return 2;
  }
  if (exit_now) return 0;
  tumbler::server::SetLogLevel(config.log_level);
  TLOG_INFO("tumblerd %s starting (pid %d)", TUMBLER_VERSION, static_cast<int>(getpid()));

  uv_loop_t* loop = uv_default_loop();
  // The server lives until _exit: shutdown is crash-only (LIBRAFT.md pitfall 1).
  auto* server = new tumbler::server::Server(loop, config);
  st = server->Start();
  if (!st.ok()) {
    TLOG_ERROR("cannot start: %s", st.message().c_str());
    return 1;
  }
  uv_run(loop, UV_RUN_DEFAULT);
  return 0;
}
