#include "brigade/plan/cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <toml.hpp>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/base/nearest_name.h"
#include "brigade/runtime/toml_limits.h"

namespace brigade {

namespace {

struct Key {
  const char* table;  // "cluster", "device", "link.node", "link.cluster"
  const char* name;
  double* value;
  double lo, hi;  // allowed range, inclusive
  bool required;
  bool integer;
};

std::vector<Key> keys(ClusterSpec& c, double (&ints)[3]) {
  constexpr double kMax = 1e30;
  return {
      {"cluster", "nodes", &ints[0], 1, 1 << 20, true, true},
      {"cluster", "processes_per_node", &ints[1], 1, 1 << 16, true, true},
      {"cluster", "devices_per_node", &ints[2], 1, 1 << 16, true, true},
      {"cluster", "process_overhead_mib", &c.process_overhead_mib, 0, 1 << 20, true, false},
      {"cluster", "sharing_efficiency", &c.sharing_efficiency, 0.01, 1, false, false},
      {"cluster", "communicator_mib", &c.communicator_mib, 0, 1 << 20, false, false},
      {"device", "peak_flops", &c.device.peak_flops, 1, kMax, true, false},
      {"device", "peak_flops_bf16", &c.device.peak_flops_bf16, 0, kMax, false, false},
      {"device", "gemm_flops", &c.device.gemm_flops, 1, kMax, true, false},
      {"device", "gemm_flops_bf16", &c.device.gemm_flops_bf16, 0, kMax, false, false},
      {"device", "gemm_call_us", &c.device.gemm_call_us, 0, 1e9, false, false},
      {"device", "attention_flops", &c.device.attention_flops, 1, kMax, true, false},
      {"device", "elementwise_gbs", &c.device.elementwise_gbs, 1e-3, kMax, true, false},
      {"device", "comm_overlap", &c.device.comm_overlap, 0, 1, false, false},
      {"device", "memory_bandwidth_gbs", &c.device.memory_bandwidth_gbs, 1e-3, kMax, true, false},
      {"device", "memory_gib", &c.device.memory_gib, 1e-3, kMax, true, false},
      {"device", "watts", &c.device.watts, 0, 1e6, true, false},
      {"link.node", "bandwidth_gbit", &c.node_link.bandwidth_gbit, 1e-6, kMax, true, false},
      {"link.node", "latency_us", &c.node_link.latency_us, 0, 1e9, true, false},
      {"link.cluster", "bandwidth_gbit", &c.cluster_link.bandwidth_gbit, 1e-6, kMax, false, false},
      {"link.cluster", "latency_us", &c.cluster_link.latency_us, 0, 1e9, false, false},
  };
}

// The table at a dotted path ("link.node"), or null when absent.
const toml::value* find_table(const toml::value& root, const std::string& dotted) {
  const toml::value* at = &root;
  size_t begin = 0;
  while (begin <= dotted.size()) {
    const size_t dot = std::min(dotted.find('.', begin), dotted.size());
    const std::string part = dotted.substr(begin, dot - begin);
    if (!at->is_table() || !at->contains(part)) return nullptr;
    at = &at->as_table().at(part);
    begin = dot + 1;
  }
  return at;
}

// Every key of the file must be one of `known` ("cluster.nodes"); tables must be known tables.
void refuse_unknown(const toml::value& v, const std::string& prefix,
                    const std::vector<std::string>& known, const std::string& origin) {
  if (!v.is_table()) return;
  for (const auto& [k, child] : v.as_table()) {
    const std::string path = prefix.empty() ? k : prefix + "." + k;
    const bool leaf = std::find(known.begin(), known.end(), path) != known.end();
    const bool table_prefix = std::any_of(known.begin(), known.end(), [&](const std::string& n) {
      return n.rfind(path + ".", 0) == 0;
    });
    if (leaf) continue;
    if (table_prefix && child.is_table()) {
      refuse_unknown(child, path, known, origin);
      continue;
    }
    const std::string near = nearest_name(path, known);
    throw ConfigError(fmt::format("{}: unknown key {}{}", origin, path.substr(0, 120),
                                  near.empty() ? "" : fmt::format(" (did you mean {}?)", near)));
  }
}

}  // namespace

double ClusterSpec::device_share() const {
  return std::min(1.0,
                  static_cast<double>(devices_per_node) / static_cast<double>(processes_per_node));
}

double ClusterSpec::memory_bytes_per_process() const {
  return device.memory_gib * static_cast<double>(devices_per_node) /
         static_cast<double>(processes_per_node) * static_cast<double>(1 << 30);
}

ClusterSpec parse_cluster(const std::string& text, const std::string& origin) {
  check_toml_limits(text, origin);
  toml::value root;
  try {
    std::istringstream is(text);
    root = toml::parse(is, origin);
  } catch (const std::exception& e) {
    throw ConfigError(
        fmt::format("{}: TOML syntax error: {}", origin, std::string(e.what()).substr(0, 2000)));
  }
  ClusterSpec c;
  double ints[3] = {0, 0, 0};
  const std::vector<Key> schema = keys(c, ints);
  std::vector<std::string> known;
  for (const Key& k : schema) known.push_back(std::string(k.table) + "." + k.name);
  refuse_unknown(root, "", known, origin);
  for (const Key& k : schema) {
    const std::string name = std::string(k.table) + "." + k.name;
    const toml::value* table = find_table(root, k.table);
    const bool present = table != nullptr && table->is_table() && table->contains(k.name);
    if (!present) {
      if (k.required) throw ConfigError(fmt::format("{}: {} is missing", origin, name));
      continue;
    }
    const toml::value& v = table->as_table().at(k.name);
    double x = 0;
    if (v.is_integer()) {
      x = static_cast<double>(v.as_integer());
    } else if (v.is_floating() && !k.integer) {
      x = v.as_floating();
    } else {
      throw ConfigError(
          fmt::format("{}: {}: expected {}", origin, name, k.integer ? "an integer" : "a number"));
    }
    if (!std::isfinite(x) || x < k.lo || x > k.hi) {
      throw ConfigError(
          fmt::format("{}: {} = {}: must be in [{}, {}]", origin, name, x, k.lo, k.hi));
    }
    *k.value = x;
  }
  c.nodes = static_cast<int64_t>(ints[0]);
  c.processes_per_node = static_cast<int64_t>(ints[1]);
  c.devices_per_node = static_cast<int64_t>(ints[2]);
  if (c.nodes > 1 && c.cluster_link.bandwidth_gbit <= 0) {
    throw ConfigError(fmt::format(
        "{}: cluster.nodes = {}: [link.cluster] (bandwidth_gbit, latency_us) is missing; it is "
        "the link between nodes",
        origin, c.nodes));
  }
  if (c.device.gemm_flops > c.device.peak_flops) {
    throw ConfigError(fmt::format("{}: device.gemm_flops = {}: more than device.peak_flops = {}",
                                  origin, c.device.gemm_flops, c.device.peak_flops));
  }
  if (c.device.gemm_flops_bf16 > 0 && c.device.gemm_flops_bf16 > c.device.peak_flops_bf16) {
    throw ConfigError(
        fmt::format("{}: device.gemm_flops_bf16 = {}: more than device.peak_flops_bf16 = {}",
                    origin, c.device.gemm_flops_bf16, c.device.peak_flops_bf16));
  }
  return c;
}

ClusterSpec load_cluster(const std::string& path) {
  return parse_cluster(read_file(path, TomlLimits{}.max_bytes + 1), path);
}

std::string ClusterSpec::to_toml() const {
  std::string out = fmt::format(
      "[cluster]\nnodes = {}\nprocesses_per_node = {}\ndevices_per_node = {}\n"
      "process_overhead_mib = {:.1f}\nsharing_efficiency = {:.3f}\ncommunicator_mib = {:.2f}\n\n",
      nodes, processes_per_node, devices_per_node, process_overhead_mib, sharing_efficiency,
      communicator_mib);
  out += fmt::format(
      "[device]\npeak_flops = {:.4g}\npeak_flops_bf16 = {:.4g}\ngemm_flops = {:.4g}\n"
      "gemm_flops_bf16 = {:.4g}\ngemm_call_us = {:.4g}\nattention_flops = {:.4g}\n"
      "elementwise_gbs = {:.4g}\ncomm_overlap = {:.3f}\nmemory_bandwidth_gbs = {:.4g}\n"
      "memory_gib = {:.4g}\nwatts = {:.4g}\n\n",
      device.peak_flops, device.peak_flops_bf16, device.gemm_flops, device.gemm_flops_bf16,
      device.gemm_call_us, device.attention_flops, device.elementwise_gbs, device.comm_overlap,
      device.memory_bandwidth_gbs, device.memory_gib, device.watts);
  out += fmt::format("[link.node]\nbandwidth_gbit = {:.6g}\nlatency_us = {:.6g}\n",
                     node_link.bandwidth_gbit, node_link.latency_us);
  if (cluster_link.bandwidth_gbit > 0) {
    out += fmt::format("\n[link.cluster]\nbandwidth_gbit = {:.6g}\nlatency_us = {:.6g}\n",
                       cluster_link.bandwidth_gbit, cluster_link.latency_us);
  }
  return out;
}

}  // namespace brigade
