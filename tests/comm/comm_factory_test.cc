// Options validation, the backend registry, and how create_subgroup derives a member's options.
#include "brigade/comm/comm_factory.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "brigade/base/error.h"
#include "brigade/comm/file_store.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

bool throws_config_error_containing(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
  } catch (const ConfigError& e) {
    if (std::string(e.what()).find(part) != std::string::npos) return true;
    ADD_FAILURE() << "message lacks '" << part << "': " << e.what();
    return false;
  }
  ADD_FAILURE() << "no ConfigError";
  return false;
}

TEST(CommFactoryTest, ValidateNamesTheBadField) {
  CommOptions o;
  o.size = 0;
  EXPECT_TRUE(throws_config_error_containing([&] { o.validate(); }, "size must be >= 1"));
  o.size = 4;
  o.rank = 4;
  EXPECT_TRUE(throws_config_error_containing([&] { o.validate(); }, "rank must be in [0, 4)"));
  o.rank = 1;
  EXPECT_TRUE(throws_config_error_containing([&] { o.validate(); }, "needs a rendezvous store"));
  testutil::TempDir dir;
  o.store = std::make_shared<FileStore>(dir.path());
  o.timeout = std::chrono::milliseconds(0);
  EXPECT_TRUE(throws_config_error_containing([&] { o.validate(); }, "timeout must be positive"));
}

TEST(CommFactoryTest, UnknownBackendListsRegisteredOnes) {
  CommOptions o;
  o.backend = "carrier-pigeon";
  EXPECT_TRUE(throws_config_error_containing([&] { create_communicator(o); },
                                             "unknown backend 'carrier-pigeon' (registered: gloo"));
}

// A backend that records the options it was asked for and builds nothing.
std::vector<CommOptions>& recorded() {
  static std::vector<CommOptions> r;
  return r;
}

TEST(CommFactoryTest, RegisteredBackendIsUsedAndSubgroupsGetTheirOwnNamespace) {
  register_comm_backend("recorder", [](const CommOptions& o) -> std::unique_ptr<Communicator> {
    recorded().push_back(o);
    return nullptr;
  });
  auto names = registered_comm_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "recorder"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "gloo"), names.end());

  testutil::TempDir dir;
  CommOptions world;
  world.backend = "recorder";
  world.rank = 6;
  world.size = 8;
  world.store = std::make_shared<FileStore>(dir.path());
  recorded().clear();
  const int members[] = {2, 6, 4};
  create_subgroup(world, members, "dp");
  ASSERT_EQ(recorded().size(), 1u);
  const CommOptions& sub = recorded()[0];
  EXPECT_EQ(sub.rank, 1);  // index of world rank 6 in the member list
  EXPECT_EQ(sub.size, 3);
  EXPECT_EQ(sub.group_name, "dp");
  EXPECT_EQ(sub.store_prefix, "world/dp[2,6,4]");
  EXPECT_EQ(sub.store, world.store);
  EXPECT_EQ(sub.backend, "recorder");
}

TEST(CommFactoryTest, SubgroupRejectsBadMemberLists) {
  testutil::TempDir dir;
  CommOptions world;
  world.rank = 1;
  world.size = 4;
  world.store = std::make_shared<FileStore>(dir.path());
  const int not_me[] = {0, 2};
  EXPECT_TRUE(throws_config_error_containing([&] { create_subgroup(world, not_me, "tp"); },
                                             "rank 1 is not a member of group 'tp' [0,2]"));
  const int twice[] = {1, 3, 1};
  EXPECT_TRUE(
      throws_config_error_containing([&] { create_subgroup(world, twice, "tp"); }, "twice"));
  const int outside[] = {1, 4};
  EXPECT_TRUE(throws_config_error_containing([&] { create_subgroup(world, outside, "tp"); },
                                             "outside the world of size 4"));
}

TEST(CommFactoryTest, SingleProcessGlooCommunicatorNeedsNoStore) {
  CommOptions o;  // rank 0 of 1
  auto comm = create_communicator(o);
  EXPECT_EQ(comm->backend(), "gloo");
  EXPECT_EQ(comm->name(), "world");
  std::vector<float> in = {1.f, 2.f}, out(2);
  comm->all_gather(in.data(), out.data(), 2);
  EXPECT_EQ(out, in);
  comm->barrier();
  EXPECT_EQ(comm->stats().get(OpKind::kBarrier).calls, 1);
}

}  // namespace
}  // namespace brigade
