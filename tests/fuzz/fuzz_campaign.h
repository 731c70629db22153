#pragma once
// The bounded fuzz campaign of one target: N seeded cases in a forked child, watched by the
// parent so that a crash or a hang is reported (with the case number and the input saved to a
// file) instead of taking the test binary down; the campaign then resumes after that case.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace brigade::fuzz {

struct CampaignOptions {
  int64_t cases = 1000;
  uint64_t seed = 1;          // base seed; case i uses case_seed(seed, target, i)
  double case_limit_s = 1.0;  // a case slower than this is a defect
  double hang_limit_s = 10;   // a case still running after this is killed and reported as a hang
  std::string dir;            // scratch folder (removed and recreated)
  // Stop starting new children after this many defects (known ones not counted); the inputs
  // of this many are saved. A child that keeps running reports all it finds.
  int max_defects = 10;
};

struct CampaignResult {
  int64_t cases = 0;                // cases run
  int64_t accepted = 0;             // of which accepted
  int64_t changed = 0;              // of which accepted with data different from the seed
  int64_t first_changed = -1;       // the first such case; its input is saved as
                                    // <dir>/changed-<target>-<case>.bin
  std::map<int, int64_t> rejected;  // exit code -> cases rejected with a brigade::Error of it
  double seconds = 0;               // wall time of the cases, setup excluded
  double slowest_s = 0;
  int64_t slowest_case = -1;
  std::vector<std::string> defects;  // one line each: case number, what happened, the input file
  std::vector<std::string> known;    // defects matching Target::known_defects(): reported apart

  // "1000 cases in 0.8 s: 12 accepted (0 changed); rejected: 988 exit 3; slowest 3 ms (#17)"
  std::string summary() const;
};

CampaignResult run_campaign(const std::string& target, const CampaignOptions& options);

// Writes the input of case `index` (as run_campaign would make it) to path; for reproducing.
void write_case_input(const std::string& target, const CampaignOptions& options, int64_t index,
                      const std::string& path);

}  // namespace brigade::fuzz
