// What replicated_log.h declares outside the two implementations.
#include "replication/replicated_log.h"

namespace tumbler::replication {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kUnavailable: return "unavailable";
    case Role::kFollower: return "follower";
    case Role::kCandidate: return "candidate";
    case Role::kLeader: return "leader";
  }
  return "unavailable";
}

}  // namespace tumbler::replication
