#pragma once
// A cluster as `brigade plan` sees it (docs/planning.md): nodes of equal devices, the links
// within and between nodes, and what a device draws. Written by hand from a vendor's data sheet,
// or measured on this machine by `brigade plan --calibrate` (plan/calibrate.h).
//
//   [cluster]
//   nodes = 2                    # machines
//   processes_per_node = 8       # ranks started on each (the job's world is nodes x this)
//   devices_per_node = 8         # compute devices a node's processes share (cores, GPUs)
//   process_overhead_mib = 80    # resident memory of a process before its model and activations
//   sharing_efficiency = 1       # more processes than devices: the throughput time-sharing keeps
//   communicator_mib = 0         # resident memory of one communicator of a rank
//   [device]
//   peak_flops = 19.5e12         # f32 GEMM peak of one device: MFU's denominator
//   peak_flops_bf16 = 312e12     # 0: no bf16 GEMMs
//   gemm_flops = 15e12           # a large GEMM's rate (f32), per device
//   gemm_flops_bf16 = 250e12
//   gemm_call_us = 10            # what each GEMM call costs besides its FLOPs
//   attention_flops = 8e12       # the attention kernels' rate
//   elementwise_gbs = 1200       # the other kernels' rate, GB/s
//   comm_overlap = 1             # of backward, what the gradient average can hide under
//   memory_bandwidth_gbs = 1500  # element-wise streams (the optimizer), GB/s
//   memory_gib = 80              # one device's memory
//   watts = 400                  # one device busy
//   [link.node]                  # between processes of one node
//   bandwidth_gbit = 2400
//   latency_us = 5
//   [link.cluster]               # between nodes
//   bandwidth_gbit = 200
//   latency_us = 10
//
// Every key is required but the bf16 ones (0: none), gemm_call_us (0), comm_overlap (1),
// sharing_efficiency (1), communicator_mib (0) and [link.cluster] on one node.
#include <cstdint>
#include <string>

namespace brigade {

struct LinkSpec {
  double bandwidth_gbit = 0;  // each way
  double latency_us = 0;      // one round trip (docs/slow-links.md: a round costs one RTT)

  double bytes_per_s() const { return bandwidth_gbit * 1e9 / 8; }
  double rtt_s() const { return latency_us * 1e-6; }
};

struct DeviceSpec {
  double peak_flops = 0;
  double peak_flops_bf16 = 0;
  // A GEMM call of f FLOPs takes gemm_call_us + f / gemm_flops: small GEMMs (short
  // micro-batches, thin tp shards) run below the rate.
  double gemm_flops = 0;
  double gemm_flops_bf16 = 0;
  double gemm_call_us = 0;
  // Attention's rate (FLOPs: 4 T C per token and block forward, twice that backward), and the
  // rate the other kernels (layer norms, GELU, residuals, embedding, softmax) stream bytes at.
  double attention_flops = 0;
  double elementwise_gbs = 0;
  // The share of the last micro-batch's backward that the replicas' gradient average can run
  // under: 1 where the link moves data without the device (GPUs and their DMA engines), 0 where
  // the collective's copies and sums need the cores that compute (a CPU node whose processes
  // use every core).
  double comm_overlap = 1;
  double memory_bandwidth_gbs = 0;
  double memory_gib = 0;
  double watts = 0;
};

struct ClusterSpec {
  int64_t nodes = 1;
  int64_t processes_per_node = 1;
  int64_t devices_per_node = 1;
  double process_overhead_mib = 0;
  // With more processes than devices: the share of a device's throughput that time-sharing
  // keeps (switches, caches shared by more working sets); 1 = none lost.
  double sharing_efficiency = 1;
  // Resident memory each communicator of a rank holds (Gloo's pairs and buffers): a
  // model-parallel rank has one per mesh axis it shares with others.
  double communicator_mib = 0;
  DeviceSpec device;
  LinkSpec node_link;
  LinkSpec cluster_link;

  int64_t world() const { return nodes * processes_per_node; }
  // A process's share of its node's devices: 1 with a device each; 1/4 when 8 processes share 2
  // cores. A process runs on at most one device (one GEMM thread, blas_threads = 1).
  double device_share() const;
  // Memory one process may use: its share of the node's device memory, in bytes.
  double memory_bytes_per_process() const;

  std::string to_toml() const;
};

// Parses and validates a cluster file's text; ConfigError naming the key (and origin) for an
// unknown key, a missing one, a wrong type or a value out of range (a negative bandwidth, zero
// devices).
ClusterSpec parse_cluster(const std::string& toml_text, const std::string& origin);
// Reads the file (bounded, as a config is) and parses it.
ClusterSpec load_cluster(const std::string& path);

}  // namespace brigade
