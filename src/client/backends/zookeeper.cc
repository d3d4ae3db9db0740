// The zookeeper:// backend: locks over Apache ZooKeeper with the recipe of
// the ZooKeeper documentation ("Locks", "Shared Locks"), through the C client
// (libzookeeper_mt). Layout of the znodes: zookeeper_path.h.
//
// Session. One ZooKeeper session per Client: zookeeper_init with
// recv_timeout = session_ttl. The server clamps the timeout it grants to
// [2, 20] x its tickTime (4 s .. 40 s with the default tickTime of 2 s);
// Open() reads the granted one back (zoo_recv_timeout) and refuses to open
// (kInvalidArgument) when it is shorter than session_ttl, because "safe
// until" is computed with session_ttl and would then promise more than the
// server keeps. A longer grant is accepted: safe-until stays conservative,
// but a crashed holder's locks then last for the longer grant. The session id
// is ZooKeeper's (zoo_client_id). The C client pings the server by itself and
// moves to another server of the ensemble when one fails, keeping the session;
// Renew() checks the handle's state and makes one read round trip, so that
// "safe until" = start of that round trip + session_ttl: the server cannot
// expire a session sooner than its timeout after it last heard from it. The
// watcher turns a session-expired (or auth-failed) event into DeclareLost at
// once; an unreachable server is declared lost by the watchdog when
// safe-until passes, and the handle is then closed, so that the session is
// never revived behind the caller's back.
//
// Acquire. Create an EPHEMERAL_SEQUENTIAL node in the lock's folder, list the
// folder, sort by sequence number. An exclusive request holds the lock when
// its node is first; a shared one when no exclusive node precedes it. Else
// watch (exists) only the node that blocks it - the immediate predecessor
// (exclusive) or the last exclusive node before it (shared) - and look again
// when that watch fires: a release wakes only the request(s) it grants. The
// fencing token is the node's czxid, the id of the transaction that created
// it: zxids increase with every write of the whole ensemble, so each grant of
// a lock gets a larger token than the one before. A try-lock or a timed-out
// wait deletes its node. Nested holds are counted in BasicBackend.
//
// Connection loss. The node survives a reconnect (same session), so a waiter
// keeps its place. Transient failures (connection loss, a request not
// answered within op_timeout) are retried: a blocking Lock() until the
// session ends, a timed call until its deadline + op_timeout, then it fails
// with the last error. A create whose reply was lost is found again by its
// unique name prefix; one that cannot be resolved is recorded and cleaned up
// by the watchdog (or it ends with the session).
//
// ClientOptions: session_ttl -> the requested session timeout (above);
// op_timeout -> bound on each request and on Connect; connect_timeout is not
// used (the C client bounds each connection attempt by session timeout / the
// number of hosts); session_name is stored, with the client id and thread tag,
// as the data of each lock node (zkCli.sh `get` shows who holds or waits);
// connections_max is not used: the C client multiplexes every request on one
// TCP connection, and waits hold no request open (they are watches).
//
// Threads. The C client runs an I/O thread and a completion thread per
// handle; completions and watchers run on the latter and never block: they
// fill a Call and signal it, or signal wait_cv_. Requests are issued under
// zk_mu_ shared; closing the handle takes it exclusively. Nothing holds a
// mutex of this class while calling into BasicBackend.
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "client/backends/backends.h"
#include "client/backends/zookeeper_path.h"
#include "client/basic_backend.h"

namespace tumbler::client {
namespace {

using std::chrono::milliseconds;

constexpr Capability kCapabilities[] = {
    {Property::kMutualExclusion, Support::kYes,
     "The first node in sequence order of the lock's folder holds it; ZooKeeper orders every "
     "create through one leader."},
    {Property::kCrashRelease, Support::kYes,
     "Lock nodes are ephemeral: the server deletes them when the holder's session expires, "
     "`session_ttl` after it last heard from it (the server clamps the timeout to [2, 20] x its "
     "`tickTime`; a shorter grant than `session_ttl` is refused at connect)."},
    {Property::kRenewal, Support::kYes,
     "The ZooKeeper client heartbeats the session by itself; the watchdog checks it with one read "
     "every `session_ttl / 3` to keep `SafeUntil()` honest."},
    {Property::kBlocking, Support::kYes,
     "A waiter sets a watch on the node ahead of it and sleeps until ZooKeeper notifies its "
     "deletion."},
    {Property::kTryLock, Support::kYes,
     "Creates its node, and deletes it again at once when another node is ahead."},
    {Property::kReentrancy, Support::kYes,
     "Counted in the client: a nested lock costs no round trip and the node stays until the last "
     "unlock."},
    {Property::kFairness, Support::kYes,
     "Requests are granted in the order of their sequence numbers; a waiter keeps its node, and so "
     "its place, across reconnects."},
    {Property::kFencing, Support::kYes,
     "The token is the lock node's `czxid` (the id of the transaction that created it), which "
     "grows with every write to the ensemble."},
    {Property::kSharedMode, Support::kYes,
     "The shared-lock recipe: a reader waits only for the last writer queued before it, and a "
     "reader never passes a waiting writer."},
    {Property::kNoHerd, Support::kYes,
     "Each waiter watches only the node that blocks it, so a release wakes only the request(s) it "
     "grants."},
    {Property::kDeadlockDetection, Support::kNo,
     "ZooKeeper keeps no wait-for graph; a lock cycle waits until a timeout or a session ends."},
    {Property::kHighAvailability, Support::kYes,
     "List the ensemble's members in the URL: the session and its locks survive the loss of a "
     "minority, and the client moves to another member."},
    {Property::kDurability, Support::kYes,
     "A create is acknowledged after a quorum has written it to its transaction log (fsync)."},
};

// A create that fails with "no node" has lost its folder (a container the
// server removed once empty, or a deleted root): recreate it at most this
// often per acquire.
constexpr int kFolderRecreatesMax = 8;
// Children of one lock folder read at most: holders and waiters of one lock.
constexpr size_t kQueueNodesMax = limits::kWaitersPerLockMax;
// Pause between retries of a transient failure (also ended by a reconnect).
constexpr Clock::duration kRetryPause = milliseconds(100);
// Cleanups owed (nodes whose delete failed, creates whose outcome is not
// known); past this the oldest is dropped and its node ends with the session.
constexpr size_t kCleanupsMax = 4096;
// Cleanups one renewal works through, so that a backlog cannot hold the
// watchdog for long.
constexpr size_t kCleanupsPerRenewMax = 32;
// Bytes of session_name stored in a lock node's data.
constexpr size_t kSessionNameBytesMax = limits::kSessionLabelBytesMax;

// True on the C client's completion thread while one of our callbacks runs:
// the handle cannot be closed from there (zookeeper_close joins that thread).
thread_local bool t_in_zookeeper_callback = false;

struct CallbackScope {
  CallbackScope() { t_in_zookeeper_callback = true; }
  ~CallbackScope() { t_in_zookeeper_callback = false; }
};

// ZSESSIONMOVED: a request that reached a server the session has just left;
// the session itself lives on.
bool IsTransient(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONMOVED;
}

bool IsSessionGone(int rc) {
  return rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZCLOSING;
}

Status ErrorStatus(int rc, const std::string& what) {
  std::string text = what + ": " + zerror(rc);
  if (IsTransient(rc)) {
    return Status(rc == ZOPERATIONTIMEOUT ? StatusCode::kTimeout : StatusCode::kUnavailable, text);
  }
  if (IsSessionGone(rc)) return Status(StatusCode::kSessionLost, text);
  if (rc == ZNOAUTH || rc == ZAUTHFAILED) return Status(StatusCode::kNoAuth, text);
  return Status(StatusCode::kErr, text);
}

bool IsTransient(const Status& status) {
  return status.code() == StatusCode::kUnavailable || status.code() == StatusCode::kTimeout;
}

std::string Basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// The C client's log: dropped (failures reach the caller as Status values),
// unless TUMBLER_ZOOKEEPER_LOG is set, which sends it to stderr.
void LogCallback(const char* message) {
  static const bool enabled = std::getenv("TUMBLER_ZOOKEEPER_LOG") != nullptr;
  if (enabled) std::fprintf(stderr, "%s\n", message);
}

class ZooKeeperBackend final : public BasicBackend {
 public:
  ZooKeeperBackend(zk::Url url, ClientOptions options)
      : BasicBackend(std::move(options)), url_(std::move(url)) {}
  ~ZooKeeperBackend() override { CloseHandle().IgnoreError(); }
  ZooKeeperBackend(const ZooKeeperBackend&) = delete;
  ZooKeeperBackend& operator=(const ZooKeeperBackend&) = delete;

  const BackendInfo& info() const override { return ZooKeeperBackendInfo(); }
  Status Open() override;

 protected:
  Result<std::optional<Grant>> AcquireRemote(const std::string& name, const std::string& owner,
                                             LockMode mode, Deadline deadline,
                                             const Grant* current) override;
  Status ReleaseRemote(const std::string& name, const std::string& owner, LockMode mode,
                       const Grant& grant, uint32_t remaining) override;
  Status Renew(const std::vector<HeldLock>& holds) override;
  Status CloseRemote(const std::vector<HeldLock>& holds) override;
  void InterruptAll() override;

 private:
  // One asynchronous request. The completion fills it in on the C client's
  // completion thread; the caller waits for it with a deadline. Shared by
  // both, because a caller that gives up leaves before the completion runs.
  struct Call {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int rc = ZOK;
    std::string path;                   // create: the node created
    int64_t czxid = 0;                  // create, exists: Stat.czxid
    std::vector<std::string> children;  // get_children
    bool too_many = false;              // get_children: more than kQueueNodesMax
  };
  // A lock node of ours, once created.
  struct OwnNode {
    std::string path;
    int64_t czxid = 0;
    int64_t sequence = 0;
  };
  // Work for the watchdog: delete `path`, or (when `prefix` is set) every
  // child of `path` whose name starts with `prefix`.
  struct Cleanup {
    std::string path;
    std::string prefix;
  };
  struct Watch {
    int waiters = 0;
    uint64_t fired = 0;
  };

  // --- Requests --------------------------------------------------------------------
  template <typename IssueFn>
  std::shared_ptr<Call> Issue(IssueFn&& issue);
  // Waits for `call` until `deadline`; its rc, or ZOPERATIONTIMEOUT.
  static int Wait(const std::shared_ptr<Call>& call, Clock::time_point deadline);
  Clock::time_point OpDeadline() const { return Clock::now() + options().op_timeout; }

  std::shared_ptr<Call> CreateAsync(const std::string& path, const std::string& data, int mode);
  // *created / *czxid (may be null) get the node created.
  int Create(const std::string& path, const std::string& data, int mode, std::string* created,
             int64_t* czxid);
  int Delete(const std::string& path);
  // *too_many (may be null): the folder has more than kQueueNodesMax children
  // (then *out is empty).
  int Children(const std::string& path, std::vector<std::string>* out, bool* too_many = nullptr);
  // zoo_aexists; `watch` sets a watch reported to the global watcher.
  int Exists(const std::string& path, bool watch, int64_t* czxid);

  static void OnCreated(int rc, const char* value, const struct Stat* stat, const void* data);
  static void OnChildren(int rc, const struct String_vector* strings, const void* data);
  static void OnStat(int rc, const struct Stat* stat, const void* data);
  static void OnVoid(int rc, const void* data);
  static std::shared_ptr<Call> TakeCall(const void* data);
  static void Finish(const std::shared_ptr<Call>& call, int rc);

  // --- Session -------------------------------------------------------------------
  static void OnWatch(zhandle_t* zh, int type, int state, const char* path, void* context);
  void OnSessionEvent(int state);
  void OnNodeEvent(const char* path);
  Status CloseHandle();
  // Creates the root, root/locks and the lock folder `dir` as needed.
  Status EnsureFolders(const std::string& dir);

  // --- Acquire -------------------------------------------------------------------
  std::string LockDir(const std::string& name) const {
    return url_.root + "/locks/" + zk::EscapeName(name);
  }
  std::string NodeData(const std::string& owner) const;
  // Creates our node `prefix`NNNNNNNNNN. *maybe_created: the outcome is unknown.
  Status CreateOwnNode(const std::string& dir, const std::string& prefix,
                       const std::string& data, OwnNode* own, bool* maybe_created);
  // Looks for a node created under `prefix` whose reply was lost.
  Status FindOwnNode(const std::string& dir, const std::string& prefix, OwnNode* own);
  // The node `own` must wait for, "" when it holds the lock; kUnavailable if
  // `own` is no longer in the queue.
  Result<std::string> Blocker(const std::string& dir, const OwnNode& own, bool shared);
  // Waits until `path` is deleted (true), `deadline` passes, the connection
  // comes back after a loss, or InterruptAll (false); an error if the watch
  // cannot be set.
  Result<bool> WaitDeleted(const std::string& path, Deadline deadline);
  // Pause before retrying a transient failure: kRetryPause, a reconnect or
  // an interrupt, whichever comes first, and never past `until`.
  void PauseBeforeRetry(const std::optional<Clock::time_point>& until);
  // Removes what an acquire that did not get the lock left behind.
  void GiveUpNode(const std::string& dir, const std::string& prefix, const OwnNode& own,
                  bool maybe_created);
  void AddCleanup(Cleanup cleanup);
  void RunCleanups();
  bool Interrupted() {
    std::lock_guard lock(wait_mu_);
    return interrupted_;
  }

  const zk::Url url_;
  std::atomic<uint64_t> attempts_{0};  // makes each node prefix unique

  // The handle: requests under a shared lock, close under an exclusive one.
  std::shared_mutex zk_mu_;
  zhandle_t* zh_ = nullptr;
  bool handle_closed_ = false;
  Status close_status_;

  // Session state and the watches waiters sleep on.
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  bool connected_ = false;
  bool interrupted_ = false;
  int last_state_ = 0;
  uint64_t reconnects_ = 0;             // connected events seen
  std::map<std::string, Watch> watches_;  // one entry per watched path, bounded by the waiters

  std::mutex cleanup_mu_;
  std::deque<Cleanup> cleanups_;
};

// --- Requests ------------------------------------------------------------------------

template <typename IssueFn>
std::shared_ptr<ZooKeeperBackend::Call> ZooKeeperBackend::Issue(IssueFn&& issue) {
  auto call = std::make_shared<Call>();
  // The completion owns this reference; it is freed here if none will run.
  auto* ref = new std::shared_ptr<Call>(call);
  int rc = ZCLOSING;
  {
    std::shared_lock lock(zk_mu_);
    if (zh_ != nullptr) rc = issue(zh_, static_cast<const void*>(ref));
  }
  if (rc != ZOK) {
    delete ref;
    call->done = true;
    call->rc = rc;
  }
  return call;
}

int ZooKeeperBackend::Wait(const std::shared_ptr<Call>& call, Clock::time_point deadline) {
  std::unique_lock lock(call->mu);
  if (!call->cv.wait_until(lock, deadline, [&] { return call->done; })) return ZOPERATIONTIMEOUT;
  return call->rc;
}

std::shared_ptr<ZooKeeperBackend::Call> ZooKeeperBackend::TakeCall(const void* data) {
  std::unique_ptr<std::shared_ptr<Call>> ref(
      static_cast<std::shared_ptr<Call>*>(const_cast<void*>(data)));
  return std::move(*ref);
}

void ZooKeeperBackend::Finish(const std::shared_ptr<Call>& call, int rc) {
  std::lock_guard lock(call->mu);
  call->rc = rc;
  call->done = true;
  call->cv.notify_all();
}

void ZooKeeperBackend::OnCreated(int rc, const char* value, const struct Stat* stat,
                                 const void* data) {
  CallbackScope scope;
  std::shared_ptr<Call> call = TakeCall(data);
  {
    // A create its caller gave up on is not cleaned up from here: the caller
    // may still adopt the node (FindOwnNode), or has recorded its prefix for
    // the watchdog, whose listing the server answers after this create, as
    // it answers one session's requests in order.
    std::lock_guard lock(call->mu);
    if (rc == ZOK && value != nullptr) call->path = value;
    if (rc == ZOK && stat != nullptr) call->czxid = stat->czxid;
  }
  Finish(call, rc);
}

void ZooKeeperBackend::OnChildren(int rc, const struct String_vector* strings, const void* data) {
  CallbackScope scope;
  std::shared_ptr<Call> call = TakeCall(data);
  {
    std::lock_guard lock(call->mu);
    if (rc == ZOK && strings != nullptr) {
      if (static_cast<size_t>(strings->count) > kQueueNodesMax) {
        call->too_many = true;
      } else {
        call->children.assign(strings->data, strings->data + strings->count);
      }
    }
  }
  Finish(call, rc);
}

void ZooKeeperBackend::OnStat(int rc, const struct Stat* stat, const void* data) {
  CallbackScope scope;
  std::shared_ptr<Call> call = TakeCall(data);
  {
    std::lock_guard lock(call->mu);
    if (rc == ZOK && stat != nullptr) call->czxid = stat->czxid;
  }
  Finish(call, rc);
}

void ZooKeeperBackend::OnVoid(int rc, const void* data) {
  CallbackScope scope;
  Finish(TakeCall(data), rc);
}

std::shared_ptr<ZooKeeperBackend::Call> ZooKeeperBackend::CreateAsync(const std::string& path,
                                                                      const std::string& data,
                                                                      int mode) {
  return Issue([&](zhandle_t* zh, const void* ref) {
    return zoo_acreate2(zh, path.c_str(), data.data(), static_cast<int>(data.size()),
                        &ZOO_OPEN_ACL_UNSAFE, mode, OnCreated, ref);
  });
}

int ZooKeeperBackend::Create(const std::string& path, const std::string& data, int mode,
                             std::string* created, int64_t* czxid) {
  std::shared_ptr<Call> call = CreateAsync(path, data, mode);
  int rc = Wait(call, OpDeadline());
  if (rc == ZOK) {
    std::lock_guard lock(call->mu);
    if (created != nullptr) *created = call->path;
    if (czxid != nullptr) *czxid = call->czxid;
  }
  return rc;
}

int ZooKeeperBackend::Delete(const std::string& path) {
  std::shared_ptr<Call> call = Issue([&](zhandle_t* zh, const void* ref) {
    return zoo_adelete(zh, path.c_str(), -1, OnVoid, ref);
  });
  return Wait(call, OpDeadline());
}

int ZooKeeperBackend::Children(const std::string& path, std::vector<std::string>* out,
                               bool* too_many) {
  std::shared_ptr<Call> call = Issue([&](zhandle_t* zh, const void* ref) {
    return zoo_aget_children(zh, path.c_str(), 0, OnChildren, ref);
  });
  int rc = Wait(call, OpDeadline());
  if (rc == ZOK) {
    std::lock_guard lock(call->mu);
    *out = std::move(call->children);
    if (too_many != nullptr) *too_many = call->too_many;
  }
  return rc;
}

int ZooKeeperBackend::Exists(const std::string& path, bool watch, int64_t* czxid) {
  std::shared_ptr<Call> call = Issue([&](zhandle_t* zh, const void* ref) {
    return zoo_aexists(zh, path.c_str(), watch ? 1 : 0, OnStat, ref);
  });
  int rc = Wait(call, OpDeadline());
  if (rc == ZOK && czxid != nullptr) {
    std::lock_guard lock(call->mu);
    *czxid = call->czxid;
  }
  return rc;
}

// --- Session ---------------------------------------------------------------------------

void ZooKeeperBackend::OnWatch(zhandle_t*, int type, int state, const char* path, void* context) {
  CallbackScope scope;
  auto* self = static_cast<ZooKeeperBackend*>(context);
  if (type == ZOO_SESSION_EVENT) {
    self->OnSessionEvent(state);
  } else {
    self->OnNodeEvent(path);
  }
}

void ZooKeeperBackend::OnSessionEvent(int state) {
  {
    std::lock_guard lock(wait_mu_);
    last_state_ = state;
    connected_ = state == ZOO_CONNECTED_STATE;
    if (connected_) ++reconnects_;
    wait_cv_.notify_all();
  }
  if (state == ZOO_EXPIRED_SESSION_STATE) {
    DeclareLost("the ZooKeeper session expired (the server did not hear from the client for "
                "its session timeout)");
  } else if (state == ZOO_AUTH_FAILED_STATE) {
    DeclareLost("ZooKeeper authentication failed");
  }
}

void ZooKeeperBackend::OnNodeEvent(const char* path) {
  if (path == nullptr) return;
  std::lock_guard lock(wait_mu_);
  auto it = watches_.find(path);
  if (it == watches_.end()) return;  // a watch left by a waiter that gave up
  ++it->second.fired;
  wait_cv_.notify_all();
}

Status ZooKeeperBackend::CloseHandle() {
  std::unique_lock lock(zk_mu_);
  if (handle_closed_) return close_status_;
  handle_closed_ = true;
  if (zh_ == nullptr) return close_status_;
  // Ends the session: the server deletes its ephemeral nodes, so every hold
  // and every waiting request goes with it. Pending completions run with
  // ZCLOSING before this returns.
  int rc = zookeeper_close(zh_);
  zh_ = nullptr;
  if (rc != ZOK) close_status_ = ErrorStatus(rc, "closing the ZooKeeper session");
  return close_status_;
}

Status ZooKeeperBackend::Open() {
  const Clock::time_point started = Clock::now();
  const Clock::time_point deadline = started + options().op_timeout;
  const auto ttl_ms = static_cast<int>(options().session_ttl.count());
  {
    std::unique_lock lock(zk_mu_);
    zh_ = zookeeper_init2(url_.hosts.c_str(), OnWatch, ttl_ms, nullptr, this, ZOO_NO_LOG_CLIENTENV,
                          LogCallback);
    if (zh_ == nullptr) {
      return Status(StatusCode::kUnavailable, "zookeeper_init(" + url_.hosts +
                                                  ") failed: " + std::strerror(errno));
    }
  }
  bool connected = false;
  int state = 0;
  {
    std::unique_lock lock(wait_mu_);
    wait_cv_.wait_until(lock, deadline, [&] {
      return connected_ || last_state_ == ZOO_EXPIRED_SESSION_STATE ||
             last_state_ == ZOO_AUTH_FAILED_STATE;
    });
    connected = connected_;
    state = last_state_;
  }
  if (!connected) {
    CloseHandle().IgnoreError();
    if (state == ZOO_AUTH_FAILED_STATE) {
      return Status(StatusCode::kNoAuth, "ZooKeeper at " + url_.hosts + " refused authentication");
    }
    return Status(StatusCode::kUnavailable, "could not open a ZooKeeper session at " + url_.hosts +
                                                " within op_timeout (" +
                                                std::to_string(options().op_timeout.count()) +
                                                " ms)");
  }
  int granted_ms = 0;
  int64_t session = 0;
  {
    std::shared_lock lock(zk_mu_);
    granted_ms = zoo_recv_timeout(zh_);
    const clientid_t* id = zoo_client_id(zh_);
    if (id != nullptr) session = id->client_id;
  }
  if (granted_ms < ttl_ms) {
    CloseHandle().IgnoreError();
    return Status(StatusCode::kInvalidArgument,
                  "ZooKeeper granted a session timeout of " + std::to_string(granted_ms) +
                      " ms, shorter than session_ttl (" + std::to_string(ttl_ms) +
                      " ms); its maximum is 20 x tickTime (maxSessionTimeout): lower session_ttl");
  }
  if (session == 0) {
    CloseHandle().IgnoreError();
    return Status(StatusCode::kProtocol, "ZooKeeper gave session id 0");
  }
  if (Status status = EnsureFolders(""); !status.ok()) {
    CloseHandle().IgnoreError();
    return status;
  }
  SetSessionId(static_cast<uint64_t>(session));
  MarkRenewed(started);
  return Status::Ok();
}

Status ZooKeeperBackend::EnsureFolders(const std::string& dir) {
  std::vector<std::pair<std::string, int>> folders;
  for (size_t slash = url_.root.find('/', 1); slash != std::string::npos;
       slash = url_.root.find('/', slash + 1)) {
    folders.emplace_back(url_.root.substr(0, slash), ZOO_PERSISTENT);
  }
  folders.emplace_back(url_.root, ZOO_PERSISTENT);
  folders.emplace_back(url_.root + "/locks", ZOO_PERSISTENT);
  // A container, so that the folders of locks no longer used do not pile up.
  if (!dir.empty()) folders.emplace_back(dir, ZOO_CONTAINER);
  for (const auto& [path, mode] : folders) {
    int rc = Create(path, "", mode, nullptr, nullptr);
    if (rc != ZOK && rc != ZNODEEXISTS) return ErrorStatus(rc, "creating " + path);
  }
  return Status::Ok();
}

Status ZooKeeperBackend::Renew(const std::vector<HeldLock>&) {
  int state = 0;
  int granted_ms = 0;
  {
    std::shared_lock lock(zk_mu_);
    if (zh_ == nullptr) return Status(StatusCode::kSessionLost, "the ZooKeeper handle is closed");
    state = zoo_state(zh_);
    granted_ms = zoo_recv_timeout(zh_);
  }
  if (state == ZOO_EXPIRED_SESSION_STATE) {
    return Status(StatusCode::kSessionLost, "the ZooKeeper session expired");
  }
  if (state == ZOO_AUTH_FAILED_STATE) {
    return Status(StatusCode::kSessionLost, "ZooKeeper authentication failed");
  }
  if (state != ZOO_CONNECTED_STATE) {
    return Status(StatusCode::kUnavailable, "not connected to ZooKeeper (reconnecting)");
  }
  if (granted_ms < options().session_ttl.count()) {
    // A member with a smaller maxSessionTimeout: safe-until would lie.
    return Status(StatusCode::kUnavailable,
                  "the ZooKeeper server now grants " + std::to_string(granted_ms) +
                      " ms, less than session_ttl");
  }
  // One round trip: the server heard from this session after the watchdog
  // took its start time, so the session lives at least session_ttl past it.
  int rc = Exists(url_.root, false, nullptr);
  if (rc != ZOK && rc != ZNONODE) return ErrorStatus(rc, "ZooKeeper keep-alive read");
  RunCleanups();
  return Status::Ok();
}

Status ZooKeeperBackend::CloseRemote(const std::vector<HeldLock>&) { return CloseHandle(); }

void ZooKeeperBackend::InterruptAll() {
  {
    std::lock_guard lock(wait_mu_);
    interrupted_ = true;
    wait_cv_.notify_all();
  }
  // Closing ends the session on the server (when it can still be reached) and
  // stops the client from reviving it: BasicBackend has forgotten the holds,
  // so their nodes must not outlive this point longer than the session
  // timeout. From the completion thread (a session-expired event) the handle
  // cannot be closed, and need not be: an expired handle never reconnects.
  if (!t_in_zookeeper_callback) CloseHandle().IgnoreError();
}

// --- Acquire / release ------------------------------------------------------------------

std::string ZooKeeperBackend::NodeData(const std::string& owner) const {
  std::string data = "client=" + client_id() + " owner=" + owner;
  if (!options().session_name.empty()) {
    data += " session=" + options().session_name.substr(0, kSessionNameBytesMax);
  }
  return data;
}

Status ZooKeeperBackend::CreateOwnNode(const std::string& dir, const std::string& prefix,
                                       const std::string& data, OwnNode* own,
                                       bool* maybe_created) {
  for (int recreate = 0;; ++recreate) {
    std::string created;
    int64_t czxid = 0;
    int rc = Create(dir + "/" + prefix, data, ZOO_EPHEMERAL_SEQUENTIAL, &created, &czxid);
    if (rc == ZOK) {
      std::optional<zk::QueueNode> parsed = zk::ParseQueueNode(Basename(created));
      if (!parsed || czxid <= 0) {
        *maybe_created = true;  // cannot happen: have the watchdog delete it
        return Status(StatusCode::kProtocol, "ZooKeeper created an unexpected node " + created);
      }
      *own = OwnNode{created, czxid, parsed->sequence};
      return Status::Ok();
    }
    if (IsTransient(rc)) {
      *maybe_created = true;  // the server may have created it
      return ErrorStatus(rc, "creating a lock node in " + dir);
    }
    if (rc != ZNONODE) return ErrorStatus(rc, "creating a lock node in " + dir);
    if (recreate >= kFolderRecreatesMax) {
      return Status(StatusCode::kUnavailable, "the lock folder " + dir + " keeps disappearing");
    }
    if (Status status = EnsureFolders(dir); !status.ok()) return status;
  }
}

Status ZooKeeperBackend::FindOwnNode(const std::string& dir, const std::string& prefix,
                                     OwnNode* own) {
  std::vector<std::string> children;
  int rc = Children(dir, &children);
  if (rc == ZNONODE) return Status::Ok();  // no folder, so no node
  if (rc != ZOK) return ErrorStatus(rc, "listing " + dir);
  for (const std::string& child : children) {
    if (child.rfind(prefix, 0) != 0) continue;
    std::optional<zk::QueueNode> parsed = zk::ParseQueueNode(child);
    if (!parsed) continue;
    int64_t czxid = 0;
    rc = Exists(dir + "/" + child, false, &czxid);
    if (rc == ZNONODE) continue;
    if (rc != ZOK) return ErrorStatus(rc, "reading " + dir + "/" + child);
    *own = OwnNode{dir + "/" + child, czxid, parsed->sequence};
    return Status::Ok();
  }
  return Status::Ok();
}

Result<std::string> ZooKeeperBackend::Blocker(const std::string& dir, const OwnNode& own,
                                              bool shared) {
  std::vector<std::string> children;
  bool too_many = false;
  int rc = Children(dir, &children, &too_many);
  if (too_many) {
    return Status(StatusCode::kLimit, "more than " + std::to_string(kQueueNodesMax) +
                                          " holders and waiters in " + dir);
  }
  if (rc != ZOK && rc != ZNONODE) return ErrorStatus(rc, "listing " + dir);
  // The request ahead of ours that we must wait for: for an exclusive
  // request the closest one of any kind, for a shared one the closest
  // exclusive one. Only its deletion can change our answer.
  bool found_own = false;
  int64_t best = -1;
  std::string blocker;
  for (const std::string& child : children) {
    std::optional<zk::QueueNode> node = zk::ParseQueueNode(child);
    if (!node) continue;
    if (node->sequence == own.sequence) {
      found_own = found_own || dir + "/" + child == own.path;
      continue;
    }
    if (node->sequence > own.sequence) continue;
    if (shared && node->shared) continue;
    if (node->sequence > best) {
      best = node->sequence;
      blocker = child;
    }
  }
  if (!found_own) {
    // Not a transient failure: the session is alive (the listing worked)
    // but our place in the queue is gone.
    return Status(StatusCode::kErr, "the lock node " + own.path + " was deleted by someone else");
  }
  return blocker.empty() ? std::string() : dir + "/" + blocker;
}

Result<bool> ZooKeeperBackend::WaitDeleted(const std::string& path, Deadline deadline) {
  uint64_t fired = 0;
  uint64_t reconnects = 0;
  {
    std::lock_guard lock(wait_mu_);
    if (interrupted_) return false;
    Watch& watch = watches_[path];
    ++watch.waiters;
    fired = watch.fired;
    reconnects = reconnects_;
  }
  // Registered before the watch is set, so that no notification is missed.
  auto unregister = [&] {
    std::lock_guard lock(wait_mu_);
    auto it = watches_.find(path);
    if (it != watches_.end() && --it->second.waiters == 0) watches_.erase(it);
  };
  int rc = Exists(path, true, nullptr);
  if (rc == ZNONODE) {
    unregister();
    return true;
  }
  if (rc != ZOK) {
    unregister();
    return ErrorStatus(rc, "watching " + path);
  }
  bool deleted = false;
  {
    std::unique_lock lock(wait_mu_);
    auto woken = [&] {
      return watches_[path].fired != fired || reconnects_ != reconnects || interrupted_;
    };
    if (deadline) {
      wait_cv_.wait_until(lock, *deadline, woken);
    } else {
      wait_cv_.wait(lock, woken);
    }
    deleted = watches_[path].fired != fired;
  }
  unregister();
  return deleted;
}

void ZooKeeperBackend::PauseBeforeRetry(const std::optional<Clock::time_point>& until) {
  Clock::time_point wake = Clock::now() + kRetryPause;
  if (until && *until < wake) wake = *until;
  std::unique_lock lock(wait_mu_);
  const uint64_t reconnects = reconnects_;
  wait_cv_.wait_until(lock, wake, [&] { return reconnects_ != reconnects || interrupted_; });
}

void ZooKeeperBackend::GiveUpNode(const std::string& dir, const std::string& prefix,
                                  const OwnNode& own, bool maybe_created) {
  // A closed or lost session takes its nodes with it.
  if (Ended()) return;
  if (!own.path.empty()) {
    int rc = Delete(own.path);
    if (rc != ZOK && rc != ZNONODE && !IsSessionGone(rc)) AddCleanup(Cleanup{own.path, ""});
  } else if (maybe_created) {
    AddCleanup(Cleanup{dir, prefix});
  }
}

void ZooKeeperBackend::AddCleanup(Cleanup cleanup) {
  std::lock_guard lock(cleanup_mu_);
  if (cleanups_.size() >= kCleanupsMax) cleanups_.pop_front();
  cleanups_.push_back(std::move(cleanup));
}

void ZooKeeperBackend::RunCleanups() {
  std::deque<Cleanup> work;
  {
    std::lock_guard lock(cleanup_mu_);
    const size_t count = std::min(cleanups_.size(), kCleanupsPerRenewMax);
    work.assign(cleanups_.begin(), cleanups_.begin() + static_cast<std::ptrdiff_t>(count));
    cleanups_.erase(cleanups_.begin(), cleanups_.begin() + static_cast<std::ptrdiff_t>(count));
  }
  for (Cleanup& cleanup : work) {
    bool done = true;
    if (cleanup.prefix.empty()) {
      int rc = Delete(cleanup.path);
      done = rc == ZOK || rc == ZNONODE || IsSessionGone(rc);
    } else {
      std::vector<std::string> children;
      int rc = Children(cleanup.path, &children);
      done = rc == ZNONODE || IsSessionGone(rc);
      if (rc == ZOK) {
        done = true;
        for (const std::string& child : children) {
          if (child.rfind(cleanup.prefix, 0) != 0) continue;
          int deleted = Delete(cleanup.path + "/" + child);
          if (deleted != ZOK && deleted != ZNONODE && !IsSessionGone(deleted)) done = false;
        }
      }
    }
    if (!done) AddCleanup(std::move(cleanup));
  }
}

Result<std::optional<BasicBackend::Grant>> ZooKeeperBackend::AcquireRemote(
    const std::string& name, const std::string& owner, LockMode mode, Deadline deadline,
    const Grant*) {
  const bool shared = mode == LockMode::kShared;
  const std::string dir = LockDir(name);
  char attempt[24];
  std::snprintf(attempt, sizeof(attempt), "%llx",
                static_cast<unsigned long long>(attempts_.fetch_add(1) + 1));
  // Unique per attempt: a create whose reply was lost is found by it.
  const std::string prefix = client_id() + "-" + attempt + (shared ? "-read-" : "-lock-");
  const Clock::time_point start = Clock::now();
  const bool try_once = deadline && *deadline <= start;
  // Transient failures are retried until then (a blocking lock: until the
  // session ends); the request's own deadline gets op_timeout on top.
  std::optional<Clock::time_point> give_up;
  if (deadline) give_up = std::max(*deadline, start) + options().op_timeout;

  OwnNode own;
  bool maybe_created = false;
  Status last_error(StatusCode::kUnavailable, "no answer from ZooKeeper");
  const std::string data = NodeData(owner);
  for (;;) {
    if (Ended() || Interrupted()) return EndedStatus();
    if (give_up && Clock::now() >= *give_up) {
      GiveUpNode(dir, prefix, own, maybe_created);
      return last_error;
    }
    if (own.path.empty()) {
      Status status = maybe_created ? FindOwnNode(dir, prefix, &own)
                                    : CreateOwnNode(dir, prefix, data, &own, &maybe_created);
      if (status.ok() && own.path.empty()) maybe_created = false;  // lost create never happened
      if (!status.ok()) {
        if (!IsTransient(status)) {
          GiveUpNode(dir, prefix, own, maybe_created);
          return status;
        }
        last_error = status;
        PauseBeforeRetry(give_up);
        continue;
      }
      if (own.path.empty()) continue;
    }
    Result<std::string> blocker = Blocker(dir, own, shared);
    if (!blocker.ok()) {
      if (!IsTransient(blocker.status())) {
        GiveUpNode(dir, prefix, own, maybe_created);
        return blocker.status();
      }
      last_error = blocker.status();
      PauseBeforeRetry(give_up);
      continue;
    }
    if (blocker->empty()) {
      return std::optional<Grant>(Grant{static_cast<uint64_t>(own.czxid), own.path});
    }
    if (try_once || (deadline && Clock::now() >= *deadline)) {
      GiveUpNode(dir, prefix, own, maybe_created);
      return std::optional<Grant>();
    }
    Result<bool> deleted = WaitDeleted(*blocker, deadline);
    if (!deleted.ok()) {
      if (!IsTransient(deleted.status())) {
        GiveUpNode(dir, prefix, own, maybe_created);
        return deleted.status();
      }
      last_error = deleted.status();
      PauseBeforeRetry(give_up);
    }
    // Deleted, timed out, reconnected or interrupted: the loop looks again.
  }
}

Status ZooKeeperBackend::ReleaseRemote(const std::string&, const std::string&, LockMode,
                                       const Grant& grant, uint32_t) {
  int rc = Delete(grant.handle);
  // Already gone: an earlier try whose reply was lost did it.
  if (rc == ZOK || rc == ZNONODE) return Status::Ok();
  return ErrorStatus(rc, "deleting " + grant.handle);
}

}  // namespace

const BackendInfo& ZooKeeperBackendInfo() {
  static const BackendInfo info{"zookeeper", "ZooKeeper",
                                "zookeeper://host:port[,host:port...][/root]", kCapabilities};
  return info;
}

Result<std::shared_ptr<Backend>> MakeZooKeeperBackend(std::string_view url,
                                                      const ClientOptions& options) {
  Result<zk::Url> parsed = zk::ParseUrl(url);
  if (!parsed.ok()) return parsed.status();
  // The shared options were checked by MakeBackend (registry.cc).
  return std::shared_ptr<Backend>(
      std::make_shared<ZooKeeperBackend>(std::move(parsed).value(), options));
}

}  // namespace tumbler::client
