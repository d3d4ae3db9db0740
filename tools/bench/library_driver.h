// The workloads through the client library (tumbler::Client / Mutex) instead
// of raw RESP: the way to drive every backend the library speaks (etcd://,
// zookeeper://, postgres://, mysql://, redlock://, and lib:redis:// or
// lib:tumbler:// for the library's own overhead). One thread per client, each
// with its own Client (session, watchdog) and Mutex; a blocking acquire is
// Mutex::Lock() (contended) and the loop is closed: lock, unlock, again.
//
// Also: finding the leader of a tumbler:// cluster URL for the raw driver.
#pragma once

#include "load_driver.h"

namespace tumbler::bench {

// uncontended and contended only (handoff and fill need the raw driver).
// Errors: kInvalidArgument (another workload), whatever Client::Connect or a
// lock call returned (naming the endpoint).
Result<LoadResult> RunLibraryLoad(const LoadSpec& spec);

// For a tumbler:// endpoint with several nodes: points endpoint->host/port at
// the node whose INFO says role:leader (asked in turn, bounded by `timeout`).
// Errors: kUnavailable when none leads in time.
Status ResolveLeader(Endpoint* endpoint, std::chrono::nanoseconds timeout);

}  // namespace tumbler::bench
