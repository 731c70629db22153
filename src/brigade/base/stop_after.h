#pragma once
// run.stop_after: an invocation ends `stop_after` steps (or federated rounds) after the one it
// starts at, or at the run's last, whichever comes first; 0 runs to the end.
#include <algorithm>
#include <cstdint>

namespace brigade {

inline int64_t invocation_end(int64_t total, int64_t start, int64_t stop_after) {
  return stop_after > 0 ? std::min(total, start + stop_after) : total;
}

}  // namespace brigade
