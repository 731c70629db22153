// TcpStore across processes: rank 0 hosts it, the others find it (retrying while it starts),
// set/get/wait/add see one key space, a Gloo communicator rendezvouses through it, a client
// with the wrong token is refused, and losing rank 0 fails a waiting client at once.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "brigade/base/error.h"
#include "brigade/comm/tcp_store.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::Clock;
using testutil::ms_since;

TcpStoreOptions options_for(int rank, int port) {
  TcpStoreOptions o;
  o.port = port;
  o.is_server = rank == 0;
  o.timeout = 5s;
  o.rank = rank;
  return o;
}

TEST(TcpStoreMpTest, RanksShareOneKeySpaceAndGlooConnectsThroughIt) {
  const int port = testutil::pick_free_port();
  constexpr int kWorld = 4;
  auto result = testutil::run_ranks(kWorld, 30s, [&](int rank) {
    TcpStoreOptions o = options_for(rank, port);
    if (rank == 0) {
      o.token = "job-secret";              // explicit on the server
      std::this_thread::sleep_for(200ms);  // clients start first and must retry
    } else {
      ::setenv("BRIGADE_STORE_TOKEN", "job-secret", 1);
      o.token = store_token_from_env();  // the default path: from the environment
    }
    auto store = std::make_shared<TcpStore>(o);
    store->set_string("hello/" + std::to_string(rank), "from " + std::to_string(rank));
    std::vector<std::string> keys;
    for (int r = 0; r < kWorld; ++r) keys.push_back("hello/" + std::to_string(r));
    store->wait(keys, 5s);
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_EQ(store->get_string("hello/" + std::to_string(r)), "from " + std::to_string(r));
    }
    store->add("arrived", 1);
    const auto deadline = Clock::now() + 5s;
    while (store->add("arrived", 0) < kWorld && Clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    EXPECT_EQ(store->add("arrived", 0), kWorld);

    CommOptions c;
    c.rank = rank;
    c.size = kWorld;
    c.store = store;
    c.timeout = 5s;
    auto comm = create_communicator(c);
    float x = static_cast<float>(rank);
    comm->all_reduce(&x, 1, ReduceOp::kSum);
    EXPECT_EQ(x, 6.f);
    // Rank 0 hosts the store: it leaves last.
    store->set_string("done/" + std::to_string(rank), "");
    if (rank == 0) {
      std::vector<std::string> done;
      for (int r = 0; r < kWorld; ++r) done.push_back("done/" + std::to_string(r));
      store->wait(done, 5s);
    }
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

TEST(TcpStoreMpTest, ClientWithWrongTokenIsRefused) {
  const int port = testutil::pick_free_port();
  auto result = testutil::run_ranks(2, 20s, [&](int rank) {
    TcpStoreOptions o = options_for(rank, port);
    if (rank == 0) {
      o.token = "right";
      TcpStore server(o);
      server.wait({"done"}, 10s);
      return;
    }
    o.token = "wrong";
    try {
      TcpStore client(o);
      ADD_FAILURE() << "client with the wrong token was accepted";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("wrong token"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
    o.token = "right";
    TcpStore client(o);
    client.set_string("done", "1");
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

TEST(TcpStoreMpTest, LosingTheHostFailsAWaitingClientAtOnce) {
  const int port = testutil::pick_free_port();
  auto result = testutil::run_ranks(2, 20s, [&](int rank) {
    TcpStoreOptions o = options_for(rank, port);
    o.token = "";
    if (rank == 0) {
      TcpStore server(o);
      server.wait({"client-connected"}, 10s);
      std::this_thread::sleep_for(100ms);
      ::_exit(0);  // the host vanishes while the client waits
    }
    TcpStore client(o);
    client.set_string("client-connected", "");
    const auto start = Clock::now();
    try {
      client.wait({"never"}, 10s);
      ADD_FAILURE() << "wait returned without the key";
    } catch (const CommError& e) {
      EXPECT_EQ(e.kind(), CommError::Kind::kPeerLost) << e.what();
      EXPECT_LT(ms_since(start), 3000) << e.what();
    }
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

}  // namespace
}  // namespace brigade
