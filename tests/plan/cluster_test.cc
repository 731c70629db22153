// The cluster file of `brigade plan` (plan/cluster.h): a full description parses and writes back
// the same, and every bad input is refused naming the key.
#include "brigade/plan/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "brigade/base/error.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

const char* kTwoNodes = R"(
[cluster]
nodes = 2
processes_per_node = 8
devices_per_node = 8
process_overhead_mib = 500
[device]
peak_flops = 19.5e12
peak_flops_bf16 = 312e12
gemm_flops = 14e12
gemm_flops_bf16 = 200e12
gemm_call_us = 8
attention_flops = 8e12
elementwise_gbs = 1200
memory_bandwidth_gbs = 1500
memory_gib = 80
watts = 400
[link.node]
bandwidth_gbit = 2400
latency_us = 5
[link.cluster]
bandwidth_gbit = 200
latency_us = 10
)";

std::string error_of(const std::string& text) {
  try {
    parse_cluster(text, "c.toml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string with(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(Cluster, ParsesAndWritesBack) {
  const ClusterSpec c = parse_cluster(kTwoNodes, "c.toml");
  EXPECT_EQ(c.world(), 16);
  EXPECT_DOUBLE_EQ(c.device_share(), 1.0);
  EXPECT_DOUBLE_EQ(c.memory_bytes_per_process(), 80.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(c.cluster_link.bytes_per_s(), 25e9);
  EXPECT_DOUBLE_EQ(c.node_link.rtt_s(), 5e-6);
  EXPECT_DOUBLE_EQ(c.device.comm_overlap, 1.0);  // the defaults of the optional keys
  EXPECT_DOUBLE_EQ(c.sharing_efficiency, 1.0);
  const ClusterSpec back = parse_cluster(c.to_toml(), "written");
  EXPECT_EQ(back.to_toml(), c.to_toml());
  // Eight processes sharing two cores: a quarter of a device each, and of its memory.
  const ClusterSpec shared =
      parse_cluster(with(with(kTwoNodes, "devices_per_node = 8", "devices_per_node = 2"),
                         "nodes = 2", "nodes = 1"),
                    "c.toml");
  EXPECT_DOUBLE_EQ(shared.device_share(), 0.25);
  EXPECT_DOUBLE_EQ(shared.memory_bytes_per_process(), 80.0 * 2 / 8 * (1 << 30));
}

TEST(Cluster, RefusesBadInputNamingTheKey) {
  EXPECT_THAT(error_of(with(kTwoNodes, "bandwidth_gbit = 200", "bandwidth_gbit = -1")),
              HasSubstr("link.cluster.bandwidth_gbit = -1: must be in"));
  EXPECT_THAT(error_of(with(kTwoNodes, "watts = 400", "watts = 400\nwats = 3")),
              HasSubstr("unknown key device.wats (did you mean device.watts?)"));
  EXPECT_THAT(error_of(with(kTwoNodes, "memory_gib = 80\n", "")),
              HasSubstr("device.memory_gib is missing"));
  EXPECT_THAT(error_of(with(kTwoNodes, "nodes = 2", "nodes = 2.5")),
              HasSubstr("cluster.nodes: expected an integer"));
  EXPECT_THAT(error_of(with(kTwoNodes, "gemm_flops = 14e12", "gemm_flops = 30e12")),
              HasSubstr("device.gemm_flops = 30000000000000: more than device.peak_flops"));
  EXPECT_THAT(
      error_of(with(kTwoNodes, "[link.cluster]\nbandwidth_gbit = 200\nlatency_us = 10\n", "")),
      HasSubstr("cluster.nodes = 2: [link.cluster] (bandwidth_gbit, latency_us) is missing"));
  EXPECT_THAT(error_of(with(kTwoNodes, "[device]", "[gpu]")), HasSubstr("unknown key gpu"));
  EXPECT_THAT(error_of("[cluster\n"), HasSubstr("c.toml: TOML syntax error"));
}

}  // namespace
}  // namespace brigade
