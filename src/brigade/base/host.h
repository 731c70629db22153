#pragma once
// Facts about the machine a process runs on, for provenance records and per-machine caches.
#include <string>

namespace brigade {

// The CPU's model name from /proc/cpuinfo ("Intel(R) Xeon(R) ..."), or "unknown".
std::string cpu_model_name();

// This process's resident memory now (/proc/self/statm), in bytes; 0 where it cannot be read.
double resident_bytes();

// This process's peak resident memory so far (getrusage's ru_maxrss), in MiB.
double peak_resident_mib();

// The folder for brigade's per-machine caches: $BRIGADE_CACHE_DIR, else $XDG_CACHE_HOME/brigade,
// else $HOME/.cache/brigade; "" when none of them is set. Not created here.
std::string cache_dir();

}  // namespace brigade
