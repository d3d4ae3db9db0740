// How a libraft error code becomes a Status: the mapping the server (and so
// the client, through the protocol's error codes) sees. Internal to
// src/replication; only raft_log.cc and its tests include it.
#pragma once

#include <uv.h>  // before raft.h's extern "C" block: uv.h has its own guards

extern "C" {  // raft.h has no extern "C" guards (LIBRAFT.md)
#include <raft.h>
}

#include <string>

#include "tumbler/status.h"

namespace tumbler::replication {

// RAFT_NOTLEADER / RAFT_LEADERSHIPLOST: the client should go to the leader
// (the server names it from GetStatus()). Anything else from raft_apply,
// raft_barrier or their callbacks (RAFT_SHUTDOWN, RAFT_NOMEM, RAFT_IOERR,
// RAFT_TOOBIG, ...) is a condition the client may retry.
inline Status StatusFromRaftError(int raft_error) {
  if (raft_error == RAFT_NOTLEADER || raft_error == RAFT_LEADERSHIPLOST) {
    return Status(StatusCode::kNotLeader, "");
  }
  return Status(StatusCode::kTryAgain, raft_strerror(raft_error));
}

}  // namespace tumbler::replication
