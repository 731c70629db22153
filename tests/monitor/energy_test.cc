// The RAPL reader on a powercap tree the test writes (two packages, a sub-zone that must not be
// added again, a counter that wraps, an unreadable one), and the estimator's arithmetic.
#include "brigade/monitor/energy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

void zone(const std::string& dir, uint64_t energy_uj, uint64_t max_uj) {
  fs::create_directories(dir);
  std::ofstream(dir + "/energy_uj") << energy_uj << "\n";
  std::ofstream(dir + "/max_energy_range_uj") << max_uj << "\n";
}

TEST(Rapl, SumsPackagesNotTheirSubZones) {
  testing::TempDir root;
  zone(root / "intel-rapl:0", 1'000'000, 1'000'000'000);
  zone(root / "intel-rapl:1", 5'000'000, 1'000'000'000);
  zone(root / "intel-rapl:0:0", 100, 1'000'000'000);  // the cores of package 0
  RaplReader rapl(root.path());
  ASSERT_TRUE(rapl.available());
  zone(root / "intel-rapl:0", 3'000'000, 1'000'000'000);
  zone(root / "intel-rapl:1", 6'000'000, 1'000'000'000);
  zone(root / "intel-rapl:0:0", 900'000, 1'000'000'000);
  EXPECT_DOUBLE_EQ(*rapl.joules_since_last(), 3.0);  // 2 J + 1 J
  EXPECT_DOUBLE_EQ(*rapl.joules_since_last(), 0.0);
}

TEST(Rapl, CounterWrapAround) {
  testing::TempDir root;
  zone(root / "intel-rapl:0", 999'000'000, 1'000'000'000);
  RaplReader rapl(root.path());
  zone(root / "intel-rapl:0", 1'000'000, 1'000'000'000);  // wrapped: 1 J to the top, 1 J after
  EXPECT_DOUBLE_EQ(*rapl.joules_since_last(), 2.0);
}

TEST(Rapl, AbsentOrUnreadableCountersAreNotAvailable) {
  testing::TempDir root;
  EXPECT_FALSE(RaplReader(root / "nothing").available());
  fs::create_directories(root / "intel-rapl:0");  // no energy_uj: root-only on recent kernels
  EXPECT_FALSE(RaplReader(root.path()).available());
  zone(root / "intel-rapl:1", 10, 0);  // a zero range cannot wrap correctly
  EXPECT_FALSE(RaplReader(root.path()).available());
}

TEST(Energy, EstimateAndUnits) {
  EXPECT_DOUBLE_EQ(estimated_joules(2.0, 2, 5.0), 20.0);
  EXPECT_DOUBLE_EQ(kwh_of(3.6e6), 1.0);
  EXPECT_DOUBLE_EQ(co2_grams_of(7.2e6, 480.0), 960.0);
}

}  // namespace
}  // namespace brigade
