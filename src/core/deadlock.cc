// Wait-for-graph cycle detection (docs/commands.md, "Deadlock graph").
//
// Nodes are holders (session, owner). A node that waits on lock L has an edge
// to every current holder of L and to every waiter ahead of it in L's queue.
// Before request R = (session, owner) queues on a lock, we search breadth-first
// from the nodes R would wait for; reaching R means the wait would close a
// cycle.
//
// Each search step ("frame") is one wait of one node. Work is kept linear in
// the part of the graph reached, even with long queues:
// - a node's waits are expanded once (Waiter::expanded_epoch); they are found
//   with equal_range(owner) in the session's (owner, wait id)-ordered set;
// - a lock's holders are reached once (LockQueue::holders_epoch);
// - a queue is scanned from a waiter toward the head only until the first
//   waiter already reached that way (Waiter::ahead_epoch): the reached ones
//   always form a prefix of the queue, so each queue is scanned once in total.
// Every edge and every expanded wait counts toward limits::kDeadlockVisitMax;
// past it the request fails with LIMIT (too large a graph to check) rather
// than stalling the loop. Search order is by grant order, queue order and
// (owner, wait id): deterministic, and the same after a snapshot restore.
#include <algorithm>
#include <cassert>
#include <string>

#include "core/state_machine_internal.h"

namespace tumbler::core::internal {

void AppendQuoted(std::string_view bytes, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (char c : bytes) {
    auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f && c != '"' && c != '\\') {
      out->push_back(c);
    } else {
      out->append("\\x");
      out->push_back(kHex[b >> 4]);
      out->push_back(kHex[b & 0xF]);
    }
  }
  out->push_back('"');
}

namespace {

enum class Step { kContinue, kCycle, kTooLarge };

class Walk {
 public:
  Walk(StateMachineImpl& m, Session* session, std::string_view owner)
      : frames_(m.walk_frames), session_(session), owner_(owner),
        epoch_(++m.walk_epoch) {}

  Status Run(Lock* lock) {
    frames_.clear();
    frames_.push_back(WalkFrame{lock, nullptr, -1, false});
    for (size_t f = 0; f < frames_.size(); ++f) {
      Step step = Expand(static_cast<int64_t>(f));
      if (step == Step::kCycle) return Status(StatusCode::kDeadlock, CycleMessage());
      if (step == Step::kTooLarge) {
        return Status(StatusCode::kLimit,
                      "wait-for graph too large to check for deadlock (more than " +
                          std::to_string(limits::kDeadlockVisitMax) + " edges)");
      }
    }
    return Status::Ok();
  }

 private:
  // Follows the edges of frame f: to the holders of its lock, then to the
  // waiters ahead of its wait (for the request itself: the whole queue).
  Step Expand(int64_t f) {
    const WalkFrame frame = frames_[f];  // a copy: Reach() may grow frames_
    Lock* lock = frame.lock;
    LockQueue* q = lock->queue.get();
    if (q == nullptr || q->holders_epoch != epoch_) {
      if (q != nullptr) q->holders_epoch = epoch_;
      Step step = Step::kContinue;
      lock->holders.FindIf([&](const Holder& h) {
        step = Reach(h.session, h.owner, f, true);
        return step != Step::kContinue;
      });
      if (step != Step::kContinue) return step;
    }
    Waiter* ahead = frame.waiter != nullptr ? frame.waiter->prev
                                            : (q != nullptr ? q->tail : nullptr);
    for (; ahead != nullptr && ahead->ahead_epoch != epoch_; ahead = ahead->prev) {
      ahead->ahead_epoch = epoch_;
      Step step = Reach(ahead->session, ahead->owner, f, false, ahead);
      if (step != Step::kContinue) return step;
    }
    return Step::kContinue;
  }

  // Follows one edge from frame `from` to node (s, owner): the request itself
  // closes a cycle; any other node has its waits queued for expansion.
  // `ahead` is the queue entry the edge came through when it is an edge to a
  // waiter ahead. That wait needs no frame of its own: its edges (the lock's
  // holders, the waiters ahead of it) are the ones the scan in progress covers.
  // So a waiter whose session waits on nothing else costs O(1), which keeps a
  // long queue cheap to join.
  Step Reach(Session* s, std::string_view owner, int64_t from, bool via_holder,
             Waiter* ahead = nullptr) {
    if (++visits_ > limits::kDeadlockVisitMax) return Step::kTooLarge;
    if (s == session_ && owner == owner_) {
      cycle_end_ = from;
      cycle_end_via_holder_ = via_holder;
      return Step::kCycle;
    }
    if (ahead != nullptr && s->waits.size() == 1) {
      ahead->expanded_epoch = epoch_;  // the session's only wait is this one
      return Step::kContinue;
    }
    auto [begin, end] = s->waits.equal_range(owner);
    for (auto it = begin; it != end; ++it) {
      Waiter* w = *it;
      if (w->expanded_epoch == epoch_) break;  // the node's waits are all done
      if (++visits_ > limits::kDeadlockVisitMax) return Step::kTooLarge;
      w->expanded_epoch = epoch_;
      if (w != ahead) frames_.push_back(WalkFrame{w->lock, w, from, via_holder});
    }
    return Step::kContinue;
  }

  void AppendNode(const WalkFrame& frame, std::string* out) const {
    const Session* s = frame.waiter != nullptr ? frame.waiter->session : session_;
    std::string_view owner = frame.waiter != nullptr ? std::string_view(frame.waiter->owner)
                                                     : owner_;
    out->append("session ");
    out->append(std::to_string(s->id));
    out->append(" owner ");
    AppendQuoted(owner, out);
  }

  // `cycle: session 1 owner "a" waits for "L2" held by session 2 owner "" which
  // waits for "L1" held by session 1 owner "a"`; "queued behind" instead of
  // "held by" for an edge to a waiter ahead. Cut at kErrorMessageBytesMax.
  std::string CycleMessage() const {
    std::vector<int64_t> chain;
    for (int64_t k = cycle_end_; k != -1; k = frames_[k].parent) chain.push_back(k);
    std::reverse(chain.begin(), chain.end());
    std::string msg = "cycle: ";
    AppendNode(frames_[chain[0]], &msg);
    for (size_t i = 0; i < chain.size(); ++i) {
      const WalkFrame& frame = frames_[chain[i]];
      msg.append(i == 0 ? " waits for " : " which waits for ");
      AppendQuoted(*frame.lock->name, &msg);
      bool via_holder =
          i + 1 < chain.size() ? frames_[chain[i + 1]].via_holder : cycle_end_via_holder_;
      msg.append(via_holder ? " held by " : " queued behind ");
      AppendNode(i + 1 < chain.size() ? frames_[chain[i + 1]] : frames_[chain[0]], &msg);
      if (msg.size() > limits::kErrorMessageBytesMax) {
        msg.resize(limits::kErrorMessageBytesMax - 3);
        msg.append("...");
        break;
      }
    }
    return msg;
  }

  std::vector<WalkFrame>& frames_;
  Session* const session_;
  const std::string_view owner_;
  const uint64_t epoch_;
  uint64_t visits_ = 0;
  int64_t cycle_end_ = -1;
  bool cycle_end_via_holder_ = false;
};

}  // namespace

Status CheckDeadlock(StateMachineImpl& m, Session* session, std::string_view owner,
                     Lock* lock) {
  return Walk(m, session, owner).Run(lock);
}

}  // namespace tumbler::core::internal
