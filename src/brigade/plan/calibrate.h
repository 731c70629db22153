#pragma once
// `brigade plan --calibrate`: this machine as a one-node cluster file (plan/cluster.h), from
// measurements, so that predictions for it use measured numbers. Rates are per core with one
// copy per core running at once (the node's memory and caches shared as in a job):
//   device.peak_flops         the GEMM peak on one thread (monitor/gemm_calibration.h, the
//                             figure MFU uses; bf16 too where the CPU multiplies bf16)
//   device.gemm_flops,        the forward GEMMs of a block and the head at every tp degree the
//   device.gemm_call_us       model can be cut into, micro-batches of 1 and 4+ sequences,
//                             fitted to call + FLOPs / rate, then scaled to what a real step's
//                             GEMMs took (its op profiler); bf16 too where the CPU has it
//   device.attention_flops,   the real step's attention and other kernels (op profiler) over
//   device.elementwise_gbs    the cost model's counts of their FLOPs and bytes (chunk_work)
//   device.comm_overlap       1 where a core is left over for the collectives, else 0
//   memory_bandwidth_gbs      an AdamW-like stream (read 4, write 3 floats per element)
//   memory_gib                MemTotal over the cores
//   process_overhead_mib      peak resident memory with the config's data loaded and the
//                             kernels warm, before any model
//   communicator_mib          resident memory one rank's communicator adds (pairs, buffers)
//   sharing_efficiency        more processes than cores: the step throughput all of them get
//                             together against one per core
//   link.node                 Gloo's ring all-reduce among one process per core (threads here)
//                             over loopback, fitted to rounds x RTT + bytes / bandwidth over
//                             three sizes, plus the extra wait of an all-reduce that follows a
//                             GEMM; one core: TCP between two threads (the model stretches
//                             both where more processes than cores share them)
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
