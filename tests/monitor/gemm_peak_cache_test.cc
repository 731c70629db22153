// The GEMM peak MFU is relative to (monitor/gemm_calibration.h) stays put from run to run: each
// start measures, and the best rate measured on this machine for the same set-up is kept in the
// cache file and used. A damaged or implausible cache is replaced; a lower cached rate gives
// way to a higher measurement; another set-up has its own entry.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "brigade/base/file_io.h"
#include "brigade/base/host.h"
#include "brigade/monitor/gemm_calibration.h"
#include "common/run_command.h"

namespace brigade {
namespace {

class GemmPeakCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("gemm-peak");
    const char* old = std::getenv("BRIGADE_CACHE_DIR");
    saved_ = old ? old : "";
    setenv("BRIGADE_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_.empty()) {
      unsetenv("BRIGADE_CACHE_DIR");
    } else {
      setenv("BRIGADE_CACHE_DIR", saved_.c_str(), 1);
    }
  }
  nlohmann::json cache() const { return nlohmann::json::parse(read_file(file())); }
  std::string file() const { return dir_ + "/gemm_peak.json"; }
  static std::string key(const std::string& setup) { return cpu_model_name() + " | " + setup; }

  std::string dir_, saved_;
};

TEST_F(GemmPeakCache, TheBestRateOfThisMachineIsKeptAndUsed) {
  const GemmPeak first = gemm_peak_flops("test f32 1 thread(s)");
  EXPECT_EQ(first.cache, file());
  EXPECT_GT(first.measured, 1e8);
  EXPECT_EQ(first.flops, first.measured);  // nothing known yet
  EXPECT_EQ(cache().at(key("test f32 1 thread(s)")).get<double>(), first.flops);

  // A higher rate on record (a quieter moment of this machine) is what MFU uses from now on.
  const double best = first.measured * 3;
  std::ofstream(file()) << nlohmann::json{{key("test f32 1 thread(s)"), best}}.dump();
  const GemmPeak second = gemm_peak_flops("test f32 1 thread(s)");
  EXPECT_EQ(second.flops, best);
  EXPECT_LT(second.measured, best);
  // A lower one gives way to the measurement; another set-up keeps its own entry.
  std::ofstream(file()) << nlohmann::json{
      {key("test f32 1 thread(s)"), 1e6},
      {key("test bf16 1 thread(s)"),
       2e6}}.dump();
  const GemmPeak third = gemm_peak_flops("test f32 1 thread(s)");
  EXPECT_EQ(third.flops, third.measured);
  EXPECT_EQ(cache().at(key("test f32 1 thread(s)")).get<double>(), third.measured);
  EXPECT_EQ(cache().at(key("test bf16 1 thread(s)")).get<double>(), 2e6);
}

TEST_F(GemmPeakCache, ADamagedOrImplausibleCacheIsReplaced) {
  std::ofstream(file()) << "{\"not json";
  const GemmPeak garbled = gemm_peak_flops("test f32 1 thread(s)");
  EXPECT_EQ(garbled.flops, garbled.measured);
  EXPECT_EQ(cache().at(key("test f32 1 thread(s)")).get<double>(), garbled.measured);

  std::ofstream(file()) << nlohmann::json{{key("test f32 1 thread(s)"), 1e20}}.dump();
  const GemmPeak implausible = gemm_peak_flops("test f32 1 thread(s)");
  EXPECT_EQ(implausible.flops, implausible.measured);
  EXPECT_EQ(cache().at(key("test f32 1 thread(s)")).get<double>(), implausible.measured);
}

}  // namespace
}  // namespace brigade
