#include "brigade/runtime/launcher_policy.h"

#include <algorithm>

#include "brigade/base/error.h"

namespace brigade {

RestartDecision decide_restart(const LaunchOptions& o, int restarts_done, int nproc,
                               const GroupOutcome& failure) {
  RestartDecision d;
  if (failure.gave_up) {
    d.reason = "a worker outlived SIGKILL; nothing is restarted while it may still run";
    return d;
  }
  if (!o.exec_raw) {
    const char* why = failure.exit_code == kExitConfig      ? " (invalid config)"
                      : failure.exit_code == kExitIo        ? " (a file is missing or corrupt)"
                      : failure.exit_code == kExitNonFinite ? " (non-finite loss)"
                                                            : nullptr;
    if (why != nullptr) {
      d.reason =
          "exit code " + std::to_string(failure.exit_code) + why + " would repeat on a restart";
      return d;
    }
  }
  if (restarts_done >= o.max_restarts) {
    d.reason = o.max_restarts == 0 ? "no restarts allowed (--max-restarts 0)"
                                   : "no restart left (" + std::to_string(restarts_done) + " of " +
                                         std::to_string(o.max_restarts) + " used)";
    return d;
  }
  d.restart = true;
  const int min = o.min_nproc_or_nproc();
  d.nproc = min < o.nproc ? std::max(min, nproc - 1) : nproc;
  return d;
}

}  // namespace brigade
