#include "client/hold_table.h"

#include <cassert>

#include "core/limits.h"

namespace tumbler::client {

HoldTable::Entry& HoldTable::BusyEntry(const Key& key) {
  auto it = entries_.find(key);
  assert(it != entries_.end());
  assert(it->second.busy);
  return it->second;
}

HoldTable::Step HoldTable::BeginAcquire(const Key& key, LockMode mode) {
  Entry& e = entries_[key];
  if (e.busy) return Step::kBusy;
  if (e.local > 0) {
    if (e.mode != mode) return Step::kWrongMode;
    if (e.local >= limits::kHoldCountMax) return Step::kLimit;
    ++e.local;
    return Step::kDone;
  }
  e.busy = true;
  return Step::kAsk;
}

void HoldTable::Granted(const Key& key, LockMode mode, uint64_t token, uint32_t server_count) {
  Entry& e = BusyEntry(key);
  assert(e.local == 0);
  e.local = 1;
  e.mode = mode;
  e.token = token;
  e.server = server_count;
}

HoldTable::Step HoldTable::BeginRelease(const Key& key, LockMode mode) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return Step::kNotHeld;
  Entry& e = it->second;
  if (e.busy) return Step::kBusy;
  if (e.local == 0 || e.mode != mode) return Step::kNotHeld;
  if (e.local > 1) {
    --e.local;
    return Step::kDone;
  }
  e.local = 0;
  e.token = 0;
  e.busy = true;
  return Step::kAsk;
}

void HoldTable::Observe(const Key& key, uint32_t server_count) {
  // A count below the target (the server has dropped a hold the thread still
  // counts) only happens once the session is gone; the local count stays so
  // that the thread's unlock() still balances its lock().
  BusyEntry(key).server = server_count;
}

void HoldTable::MarkUnknown(const Key& key) { BusyEntry(key).server.reset(); }

std::optional<uint32_t> HoldTable::Excess(const Key& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return 0;
  const Entry& e = it->second;
  if (!e.server) return std::nullopt;
  uint32_t target = Target(e);
  return *e.server > target ? *e.server - target : 0;
}

void HoldTable::End(const Key& key) {
  auto it = entries_.find(key);
  assert(it != entries_.end());
  Entry& e = it->second;
  e.busy = false;
  if (e.local == 0 && e.server == 0u) entries_.erase(it);
}

std::vector<HoldTable::Key> HoldTable::BeginRepairs() {
  std::vector<Key> keys;
  for (auto& [key, e] : entries_) {
    if (e.busy || !NeedsRepair(e)) continue;
    e.busy = true;
    keys.push_back(key);
  }
  return keys;
}

bool HoldTable::RepairsPending() const {
  for (const auto& [key, e] : entries_) {
    if (NeedsRepair(e)) return true;
  }
  return false;
}

uint64_t HoldTable::Token(const Key& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() || it->second.local == 0 ? 0 : it->second.token;
}

uint32_t HoldTable::Count(const Key& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.local;
}

}  // namespace tumbler::client
