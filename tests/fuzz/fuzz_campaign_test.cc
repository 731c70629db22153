// The fuzz machinery itself: the mutator is deterministic and reaches its deep-nesting and
// huge-number mutations, and the campaign reports each kind of defect (crash, hang, foreign
// exception, unbounded or anonymous message, slow case) and resumes after it, so the bounded
// campaign of parsers_fault_test.cc can fail.
#include "fuzz/fuzz_campaign.h"

#include <gtest/gtest.h>

#include <csignal>
#include <stdexcept>
#include <thread>

#include "brigade/base/error.h"
#include "common/run_command.h"
#include "fuzz/fuzz_mutator.h"
#include "fuzz/fuzz_target.h"

namespace brigade::fuzz {
namespace {

TEST(FuzzMutator, IsAPureFunctionOfItsSeed) {
  const std::vector<std::string> seeds = {"[train]\nlr = 3e-4\n", "{\"a\": [1, 2]}"};
  int differ = 0, deep = 0, huge = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    const uint64_t s = case_seed(1, "config", i);
    const std::string a = mutate(seeds, s);
    EXPECT_EQ(a, mutate(seeds, s)) << i;
    differ += a != seeds[0] && a != seeds[1];
    deep += a.find("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[") != std::string::npos;
    huge += a.find("1e999999") != std::string::npos;
    EXPECT_LE(a.size(), MutatorOptions{}.max_size);
  }
  EXPECT_GT(differ, 950);
  EXPECT_GT(deep, 10);
  EXPECT_GT(huge, 5);
  EXPECT_NE(case_seed(1, "config", 0), case_seed(1, "bpe", 0));
  EXPECT_NE(case_seed(1, "config", 0), case_seed(2, "config", 0));
}

// Misbehaves on inputs that differ from its seed in their first byte (about half of them).
class Misbehaving final : public Target {
 public:
  explicit Misbehaving(char how) : how_(how) {}
  std::vector<std::string> seeds() override { return {"aaaaaaaaaaaaaaaa"}; }
  Outcome run(std::string_view input) override {
    if (input.empty() || input[0] == 'a') return {};
    switch (how_) {
      case 'c':
        std::raise(SIGSEGV);
        break;
      case 'h':
        std::this_thread::sleep_for(std::chrono::hours(1));
        break;
      case 'f':
        throw std::out_of_range("vector::at");
      case 'l':
        throw IoError("fuzz.bin: " + std::string(10000, 'x'));
      case 'n':
        throw IoError("something is wrong");
      case 's':
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        break;
    }
    throw IoError("fuzz.bin: rejected");
  }
  std::string names() const override { return "fuzz.bin"; }

 private:
  char how_;
};

template <char How>
std::unique_ptr<Target> make_misbehaving(const std::string&) {
  return std::make_unique<Misbehaving>(How);
}

CampaignResult campaign_of(const std::string& name, TargetMaker maker, double case_limit = 1.0) {
  register_target(name, maker);
  CampaignOptions o;
  o.cases = 12;
  o.case_limit_s = case_limit;
  o.hang_limit_s = 1.0;
  o.max_defects = 3;
  o.dir = testing::make_temp_dir("fuzz-selftest-" + name);
  return run_campaign(name, o);
}

void expect_defects(const CampaignResult& r, const std::string& needle) {
  ASSERT_FALSE(r.defects.empty()) << "no defect found; looking for " << needle;
  for (const std::string& d : r.defects) EXPECT_NE(d.find(needle), std::string::npos) << d;
  EXPECT_NE(r.defects.front().find("input: "), std::string::npos)
      << "the input is saved: " << r.defects.front();
}

TEST(FuzzCampaign, ReportsEachKindOfDefectAndResumesAfterIt) {
  const CampaignResult crash = campaign_of("selftest-crash", make_misbehaving<'c'>);
  // ASan catches the signal and exits 1 after its report; otherwise the signal ends the child.
  expect_defects(crash, "crashed: ");
  EXPECT_GT(crash.cases, static_cast<int64_t>(crash.defects.size())) << "resumed after a crash";
  expect_defects(campaign_of("selftest-hang", make_misbehaving<'h'>), "hung");
  expect_defects(campaign_of("selftest-foreign", make_misbehaving<'f'>), "std::out_of_range");
  expect_defects(campaign_of("selftest-long", make_misbehaving<'l'>), "rejection message of");
  expect_defects(campaign_of("selftest-anonymous", make_misbehaving<'n'>), "does not name");
  expect_defects(campaign_of("selftest-slow", make_misbehaving<'s'>, 0.1), "took");
}

TEST(FuzzCampaign, AWellBehavedTargetHasNoDefects) {
  register_target("selftest-good", [](const std::string&) -> std::unique_ptr<Target> {
    return std::make_unique<Misbehaving>('g');
  });
  CampaignOptions o;
  o.cases = 200;
  o.dir = testing::make_temp_dir("fuzz-selftest-good");
  const CampaignResult r = run_campaign("selftest-good", o);
  EXPECT_TRUE(r.defects.empty()) << r.defects.front();
  EXPECT_EQ(r.cases, 200);
  EXPECT_GT(r.accepted, 0);
  EXPECT_GT(r.rejected.at(kExitIo), 0);
}

}  // namespace
}  // namespace brigade::fuzz
