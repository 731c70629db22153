// Peers come and go, end to end: `brigade launch --nproc 4` trains DiLoCo with sync.quorum =
// 0.75 while replica 3 stalls (test hook BRIGADE_TEST_DILOCO_DELAY) past the outer-step deadline
// at update 4. The run completes; the logs say rank 3 was left out of that step (rank 0's) and
// that it rejoined from the members' theta_global (rank 3's); it is a member again later; and
// after the final outer step every replica holds the same weights (the checkpoint keeps each
// replica's, sync/replica_sync.h), the left-out one included. The exactness of the members'
// average is diloco_quorum_mp_test.cc's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/checkpoint_tensors.h"
#include "common/run_command.h"
#include "parallel/dp_run_helpers.h"

namespace brigade::testing {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class QuorumRun : public DpRuns {};

TEST_F(QuorumRun, StalledReplicaIsLeftOutAndRejoins) {
  // Deadline 1 s, stall 2.5 s: left out at update 4 (and likely 8, still 0.5 s behind), then
  // back in time: at most 3 of the 6 outer steps may leave it out.
  ::setenv("BRIGADE_TEST_DILOCO_DELAY", "3:4:2500", 1);
  std::string r = run("quorum", 4,
                      "--set train.steps=24 --set sync.method=diloco --set sync.inner_steps=4 "
                      "--set sync.payload=int8 --set sync.int8_chunk=4096 --set sync.quorum=0.75 "
                      "--set sync.outer_deadline_s=1 --set sync.quorum_retries=0");
  ::unsetenv("BRIGADE_TEST_DILOCO_DELAY");
  EXPECT_EQ(losses(r).size(), 24u);
  const std::string log0 = read_all(r + "/train.log");
  const std::string log3 = read_all(r + "/logs/rank_3.log");
  EXPECT_NE(log0.find("outer step after update 4: left out rank(s) [3]"), std::string::npos)
      << log0;
  EXPECT_NE(log3.find("outer step after update 4: this replica was left out (members [0,1,2])"),
            std::string::npos)
      << log3;
  EXPECT_LE(count(log0, "left out rank(s)"), 3) << log0;
  EXPECT_EQ(count(log0, "left out rank(s) [0"), 0) << log0;

  const auto state = read_checkpoint(r + "/checkpoints/step_00000024", CkptPart::kState);
  auto params_of = [&](int replica) {
    return state_buffer(state, "replica" + std::to_string(replica) + ".params");
  };
  const auto p1 = params_of(1);
  EXPECT_GT(p1.size(), 10u);  // every tensor of the model
  EXPECT_EQ(params_of(2), p1);
  EXPECT_EQ(params_of(3), p1);
}

}  // namespace
}  // namespace brigade::testing
