#pragma once
// `brigade plan --calibrate`: this machine as a one-node cluster file (plan/cluster.h), from
// measurements, so that predictions for it use measured numbers. Rates are per core with one
// copy per core running at once (the node's memory and caches shared as in a job):
//   device.peak_flops         the GEMM peak on one thread (monitor/gemm_calibration.h, the
//                             figure MFU uses; bf16 too where the CPU multiplies bf16)
//   device.gemm_flops         a real training step's throughput: forward + backward of the
//                             config's GPT, model FLOPs over seconds, fitted over micro-batches
//                             of 1 and 4+ sequences (gemm_half_tokens: small GEMMs are slower)
//   device.gemm_share         the share of that step in GEMMs and attention (op profiler)
//   device.comm_overlap       1 where a core is left over for the collectives, else 0
//   memory_bandwidth_gbs      an AdamW-like stream (read 4, write 3 floats per element)
//   memory_gib                MemTotal over the cores
//   process_overhead_mib      peak resident memory with the config's data loaded and the
//                             kernels warm, before any model
//   communicator_mib          resident memory one rank's communicator adds (pairs, buffers)
//   sharing_efficiency        more processes than cores: the step throughput all of them get
//                             together against one per core
//   link.node                 Gloo's ring all-reduce among one process per core (threads here)
//                             over loopback, fitted to rounds x RTT + bytes / bandwidth; one
//                             core: TCP between two threads (the model stretches both where
//                             more processes than cores share them)
// devices_per_node is the number of cores; processes_per_node is the job's (--nproc).
#include <cstdint>
#include <functional>
#include <string>

#include "brigade/plan/cluster.h"
#include "brigade/runtime/config.h"

namespace brigade {

// log: one line per measurement. processes_per_node 0: one per core.
ClusterSpec calibrate_this_machine(const Config& config, int64_t processes_per_node,
                                   const std::function<void(const std::string&)>& log);

}  // namespace brigade
