// Owner tags: how the client library tells the threads of one process apart.
//
// A holder on the server is the pair (session, owner tag) (PROTOCOL.md
// "Concepts"). The library uses one session per Client and one tag per thread,
// so two threads of one process are two holders (they exclude each other) and
// one thread relocking is reentrant, as with std::recursive_mutex.
#pragma once

#include <string>

namespace tumbler::client {

// The calling thread's tag: "t<N>-<tid>", where N is a process-wide counter
// (never reused while the process lives, unlike OS thread ids) and tid the OS
// thread id (for people reading INSPECT output). Assigned on first call from
// each thread; the reference stays valid for the life of the thread. Any thread
// may call it. The tag is far below limits::kOwnerBytesMax.
const std::string& ThreadOwnerTag();

}  // namespace tumbler::client
