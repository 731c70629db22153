// plan_job: the world cut into roles and axes, once, for every kind of job (replicas with or
// without model parallelism, parameter servers, a federation), against plans worked out by hand,
// and every refusal naming its factors. Also the named choices it dispatches on: sync.method and
// model.kind are parsed into enums as the config is read (base/named_enum.h).
#include "brigade/train/job_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "brigade/base/error.h"
#include "common/layout_gpt.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

Config gpt(int64_t tp, int64_t pp, int64_t ep = 1) {
  return testing::layout_gpt(tp, pp, ep);
}

std::string error_of(const Config& c, int64_t world) {
  try {
    plan_job(c, world);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(JobPlan, DataParallelIsAMeshOfOneAxis) {
  const JobPlan p = plan_job(gpt(1, 1), 3);
  EXPECT_EQ(p.roles, JobRoles::kReplicas);
  EXPECT_FALSE(p.model_parallel);
  EXPECT_EQ(p.trainers, 3);
  EXPECT_EQ(p.mesh.shape.pp * p.mesh.shape.ep * p.mesh.shape.tp, 1);
  EXPECT_EQ(p.mesh.shape.dp, 3);
  EXPECT_EQ(p.sync_replicas, 3);
  EXPECT_EQ(p.to_string(), "3 processes, pp=1 x dp=3 x ep=1 x tp=1");
  Config fixed = gpt(1, 1);
  fixed.parallel.dp = 2;
  EXPECT_THAT(error_of(fixed, 3), HasSubstr("parallel.dp = 2: the job has 3 processes"));
  EXPECT_EQ(error_of(fixed, 2), "");
}

TEST(JobPlan, ModelParallelReplicasCountByMethod) {
  // pp 2 x tp 2 x ep 1 on 8 processes: dp = 2.
  Config c = gpt(2, 2);
  JobPlan p = plan_job(c, 8);
  EXPECT_TRUE(p.model_parallel);
  EXPECT_EQ(p.mesh.shape.dp, 2);
  EXPECT_EQ(p.mesh.stage_bounds, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(p.sync_replicas, 2);
  // ep 2 on 4 processes (tp = pp = 1): dp = 2. DDP's replicas are the dp x ep ranks, each
  // reading its own data; a low-communication method's are the dp coordinates, each an ep group.
  c = gpt(1, 1, 2);
  p = plan_job(c, 4);
  EXPECT_EQ(p.mesh.shape.dp, 2);
  EXPECT_EQ(p.sync_replicas, 4);
  c.sync.method = SyncKind::kDiloco;
  EXPECT_EQ(plan_job(c, 4).sync_replicas, 2);
  // One process cannot hold a cut model; a world the mesh does not divide prints every factor.
  EXPECT_THAT(error_of(gpt(2, 1), 1), HasSubstr("need tp x pp x ep processes; this is one"));
  EXPECT_THAT(error_of(gpt(2, 2), 6), HasSubstr("pp=2 x dp=1 x ep=1 x tp=2 = 4 != world size 6"));
}

TEST(JobPlan, ParameterServersAreTheLastRanks) {
  Config c = gpt(1, 1);
  c.sync.method = SyncKind::kPs;
  c.ps.servers = 2;
  const JobPlan p = plan_job(c, 5);
  EXPECT_EQ(p.roles, JobRoles::kParameterServers);
  EXPECT_EQ(p.trainers, 3);
  EXPECT_EQ(p.servers, 2);
  EXPECT_EQ(p.mesh.shape.dp, 3);
  EXPECT_EQ(p.sync_replicas, 3);
  EXPECT_EQ(p.to_string(),
            "5 processes, 3 worker(s) (pp=1 x dp=3 x ep=1 x tp=1) and 2 parameter server(s)");
  EXPECT_THAT(error_of(c, 2), HasSubstr("ps.servers = 2: the job has 2 process(es), so none"));
  c.ps.aggregate = 4;
  c.ps.consistency = "asp";
  EXPECT_THAT(error_of(c, 5), HasSubstr("ps.aggregate = 4"));
  // parallel.dp counts the workers, not the job.
  c.ps.aggregate = 1;
  c.parallel.dp = 5;
  EXPECT_THAT(error_of(c, 5), HasSubstr("parallel.dp = 5: the job has 3 workers"));
}

TEST(JobPlan, AFederationIsACoordinatorAndItsClients) {
  Config c;
  c.model.kind = ModelKind::kMlp;
  c.sync.method = SyncKind::kFed;
  const JobPlan p = plan_job(c, 4);
  EXPECT_EQ(p.roles, JobRoles::kFederation);
  EXPECT_EQ(p.trainers, 3);
  EXPECT_EQ(p.sync_replicas, 3);
  EXPECT_EQ(p.to_string(), "4 processes, a coordinator and 3 client(s)");
  EXPECT_THAT(error_of(c, 1), HasSubstr("needs a coordinator (rank 0) and at least one client"));
  c.fed.min_clients = 4;
  EXPECT_THAT(error_of(c, 4), HasSubstr("fed.min_clients = 4"));
}

TEST(JobPlan, AnUnknownWorldIsPlannedFromTheConfigAlone) {
  // check-config without --nproc: dp is parallel.dp (or 1) and no role count is refused.
  Config c = gpt(2, 1);
  c.parallel.dp = 3;
  JobPlan p = plan_job(c, 0);
  EXPECT_EQ(p.mesh.shape.dp, 3);
  EXPECT_EQ(p.to_string(),
            "processes not known, pp=1 x dp=3 x ep=1 x tp=2 (the GPT cut into "
            "stages of tp shards)");
  c = gpt(1, 1);
  c.sync.method = SyncKind::kPs;
  EXPECT_EQ(plan_job(c, 0).trainers, 0);
}

TEST(NamedChoices, ParseFormatAndRoundTrip) {
  EXPECT_EQ(parse_enum<SyncKind>("powersgd"), SyncKind::kPowerSgd);
  EXPECT_EQ(parse_enum<SyncKind>("PowerSGD"), std::nullopt);  // names are exact
  EXPECT_EQ(parse_enum<ModelKind>("cnn"), ModelKind::kCnn);
  EXPECT_EQ(fmt::format("{}", SyncKind::kSignEf), "signef");
  EXPECT_EQ(nlohmann::json(SyncKind::kTopK), "topk");
  // Every name parses back to its own enumerator.
  for (size_t i = 0; i < EnumNames<SyncKind>::kNames.size(); ++i) {
    const auto e = static_cast<SyncKind>(i);
    EXPECT_EQ(parse_enum<SyncKind>(name_of(e)), e);
  }
  EXPECT_TRUE(is_low_communication(SyncKind::kDiloco));
  EXPECT_FALSE(is_low_communication(SyncKind::kDdp));
  EXPECT_FALSE(is_low_communication(SyncKind::kPs));
}

}  // namespace
}  // namespace brigade
