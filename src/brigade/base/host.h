#pragma once
// Facts about the machine a process runs on, for provenance records and per-machine caches.
#include <string>

namespace brigade {

// The CPU's model name from /proc/cpuinfo ("Intel(R) Xeon(R) ..."), or "unknown".
std::string cpu_model_name();

// The folder for brigade's per-machine caches: $BRIGADE_CACHE_DIR, else $XDG_CACHE_HOME/brigade,
// else $HOME/.cache/brigade; "" when none of them is set. Not created here.
std::string cache_dir();

}  // namespace brigade
