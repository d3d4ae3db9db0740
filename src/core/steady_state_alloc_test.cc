// Lock/Unlock on an existing session allocate nothing in the steady state but
// the new lock's own map node (names of up to 15 bytes fit std::string's inline
// buffer). Counts every operator new in this binary.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "core/state_machine.h"

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

// The replacement pair is malloc/free underneath; GCC, seeing this free()
// inlined where a library `delete` was, calls it mismatched. It is not.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace tumbler::core {
namespace {

class SteadyStateAllocTest : public ::testing::Test {
 protected:
  void SetUp() override {
    effects_.grants.reserve(16);
    effects_.ended.reserve(16);
    effects_.sessions_ended.reserve(16);
    CommandView open;
    open.type = CommandType::kOpenSession;
    open.ttl_ms = 1000;
    session_ = sm_.Apply(open, 1, &effects_).session;
    other_ = sm_.Apply(open, 1, &effects_).session;
    for (int i = 0; i < 100; ++i) Lock("held/" + std::to_string(i), other_);
  }
  CommandResult Lock(const std::string& name, uint64_t session) {
    CommandView c;
    c.type = CommandType::kLock;
    c.name = name;
    c.session = session;
    return sm_.Apply(c, 1, &effects_);
  }
  CommandResult Unlock(const std::string& name, uint64_t session) {
    CommandView c;
    c.type = CommandType::kUnlock;
    c.name = name;
    c.session = session;
    return sm_.Apply(c, 1, &effects_);
  }

  StateMachine sm_;
  Effects effects_;
  uint64_t session_ = 0;
  uint64_t other_ = 0;
};

TEST_F(SteadyStateAllocTest, NewLockCostsOneAllocation) {
  const std::string names[] = {"a", "orders/42", "fifteen-bytes-x"};
  for (const auto& name : names) {  // warm up: session vectors reach capacity
    ASSERT_EQ(Lock(name, session_).lock_outcome, LockOutcome::kGranted);
    ASSERT_TRUE(Unlock(name, session_).status.ok());
  }
  uint64_t before = g_allocations.load();
  for (int i = 0; i < 1000; ++i) {
    const std::string& name = names[i % 3];
    ASSERT_EQ(Lock(name, session_).lock_outcome, LockOutcome::kGranted);
    ASSERT_TRUE(Unlock(name, session_).status.ok());
  }
  EXPECT_EQ(g_allocations.load() - before, 1000u);
}

TEST_F(SteadyStateAllocTest, ReentrantAndBlockedLocksAllocateNothing) {
  ASSERT_EQ(Lock("mine", session_).lock_outcome, LockOutcome::kGranted);
  uint64_t before = g_allocations.load();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(Lock("mine", session_).hold_count, 2u);
    ASSERT_EQ(Unlock("mine", session_).hold_count, 1u);
    ASSERT_EQ(Lock("held/7", session_).lock_outcome, LockOutcome::kWouldBlock);
  }
  EXPECT_EQ(g_allocations.load() - before, 0u);
}

}  // namespace
}  // namespace tumbler::core
