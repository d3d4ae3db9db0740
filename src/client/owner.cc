#include "client/owner.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace tumbler::client {
namespace {

std::atomic<uint64_t> next_thread_number{1};

std::string MakeTag() {
  uint64_t number = next_thread_number.fetch_add(1, std::memory_order_relaxed);
  long tid = syscall(SYS_gettid);
  // Appends rather than "t" + ... : GCC 12 at -O3 reports a false -Wrestrict
  // for the operator+ chain.
  std::string tag = "t";
  tag += std::to_string(number);
  tag += '-';
  tag += std::to_string(tid);
  return tag;
}

}  // namespace

const std::string& ThreadOwnerTag() {
  thread_local const std::string tag = MakeTag();
  return tag;
}

}  // namespace tumbler::client
