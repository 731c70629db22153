// DiLoCo when peers come and go (sync.quorum < 1, sync/lowcomm/quorum_exchange.h), on 4 real
// processes sharing a file store:
//   - a replica that reports after the deadline is left out of that outer step: the step
//     averages exactly the reporting replicas (checked against a naive double-precision
//     Nesterov update of their pseudo-gradients); the late replica still ends the step on the
//     same theta_global, bitwise, and is a member of the next step again;
//   - short of the quorum after the retries, every replica stops with a message;
//   - the members list read from the store is validated;
//   - a replica that sends a pseudo-gradient 1000 times too large moves the mean far from the
//     honest one, while sync.outer_aggregator = median and trimmed_mean equal a naive
//     reference of the same rule; a non-finite pseudo-gradient is left out by every replica.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/comm/file_store.h"
#include "brigade/sync/lowcomm/diloco.h"
#include "brigade/sync/lowcomm/payload.h"
#include "brigade/sync/lowcomm/quorum_exchange.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::AllRanksOk;
using testutil::run_ranks;
using testutil::TempDir;

constexpr int kWorld = 4;
constexpr int64_t kN = 1000;
constexpr float kLr = 0.7f, kMu = 0.9f;

// Replica r's "inner steps" of round m: theta_local = theta_global - step(r, m), a fixed
// function every process can evaluate for every replica (the reference needs them all).
double inner_step(int r, int m, int64_t i) {
  return 0.01 * (r + 1) * std::sin(0.37 * static_cast<double>(i) + m) + 0.001 * m;
}

double initial(int64_t i) {
  return std::cos(0.11 * static_cast<double>(i));
}

// The members' pseudo-gradients of one coordinate combined: their mean, or what a robust rule
// makes of them (sorted first, in double).
using Combine = std::function<double(std::vector<double>)>;
double mean_of(std::vector<double> x) {
  double sum = 0;
  for (double v : x) sum += v;
  return sum / static_cast<double>(x.size());
}

// Naive DiLoCo outer step in double: the combined pseudo-gradient of `members` (Delta_r = theta
// - local = step, times scale[r] when given: a poisoned replica), Nesterov update.
void reference_round(std::vector<double>& theta, std::vector<double>& v,
                     const std::vector<int>& members, int m, const Combine& combine = mean_of,
                     const std::vector<double>& scale = {}) {
  for (int64_t i = 0; i < kN; ++i) {
    std::vector<double> deltas;
    for (int r : members) deltas.push_back(inner_step(r, m, i) * (scale.empty() ? 1.0 : scale[r]));
    const double delta = combine(deltas);
    v[i] = kMu * v[i] + delta;
    theta[i] -= kLr * (delta + kMu * v[i]);
  }
}

std::vector<float> start_params() {
  std::vector<float> p(kN);
  for (int64_t i = 0; i < kN; ++i) p[i] = static_cast<float>(initial(i));
  return p;
}

void take_inner_steps(std::vector<float>& p, int rank, int m) {
  for (int64_t i = 0; i < kN; ++i) p[i] -= static_cast<float>(inner_step(rank, m, i));
}

// Every rank posts its params under key and returns whether all ranks' equal rank 0's bitwise.
bool same_everywhere(Store& store, const std::string& key, int rank, const std::vector<float>& p) {
  auto as_bytes = [](const std::vector<float>& x) {
    return std::vector<char>(reinterpret_cast<const char*>(x.data()),
                             reinterpret_cast<const char*>(x.data() + x.size()));
  };
  store.set(key + "/" + std::to_string(rank), as_bytes(p));
  return store.get(key + "/0") == as_bytes(p);
}

TEST(DilocoQuorum, LateReplicaIsLeftOutThenRejoins) {
  TempDir dir;
  const std::string store_dir = dir.path();
  for (OuterWire wire : {OuterWire::kF32, OuterWire::kInt8}) {
    const std::string tag = wire == OuterWire::kF32 ? "f32" : "int8";
    auto result = run_ranks(kWorld, 60s, [&](int rank) {
      auto store = std::make_shared<FileStore>(store_dir, 20s);
      std::vector<std::string> events;
      QuorumExchange q(std::make_shared<PrefixStore>(tag, store), kWorld, rank,
                       QuorumOptions{.quorum = 0.75, .deadline = 400ms, .retries = 0},
                       [&](const std::string& s) { events.push_back(s); });
      std::vector<float> p = start_params();
      DilocoOuter outer(
          DilocoConfig{.outer_lr = kLr, .momentum = kMu, .wire = wire, .int8_chunk = 128}, p.data(),
          0, kN);
      // Round 1: rank 3 stalls past the deadline.
      take_inner_steps(p, rank, 1);
      if (rank == 3) std::this_thread::sleep_for(1500ms);
      std::vector<int> m1 = outer.outer_step(p.data(), q, "t1", "outer step 1");
      EXPECT_EQ(m1, (std::vector<int>{0, 1, 2})) << "rank " << rank;
      EXPECT_TRUE(same_everywhere(*store, tag + "/check1", rank, p)) << "rank " << rank;
      // Everyone (the late one too) reaches round 2 before its deadline runs out.
      store->add(tag + "/ready2", 1);
      store->wait({tag + "/ready2"}, 20s);
      while (std::stoll(store->get_string(tag + "/ready2")) < kWorld) {
        std::this_thread::sleep_for(5ms);
      }
      take_inner_steps(p, rank, 2);
      std::vector<int> m2 = outer.outer_step(p.data(), q, "t2", "outer step 2");
      EXPECT_EQ(m2, (std::vector<int>{0, 1, 2, 3})) << "rank " << rank;
      EXPECT_TRUE(same_everywhere(*store, tag + "/check2", rank, p)) << "rank " << rank;

      // Independent reference: round 1 over ranks 0-2, round 2 over all four.
      std::vector<double> theta(kN), v(kN, 0.0);
      for (int64_t i = 0; i < kN; ++i) theta[i] = static_cast<float>(initial(i));
      reference_round(theta, v, {0, 1, 2}, 1);
      reference_round(theta, v, {0, 1, 2, 3}, 2);
      double max_abs = 0, max_diff = 0;
      for (int64_t i = 0; i < kN; ++i) {
        max_abs = std::max(max_abs, std::abs(theta[i]));
        max_diff = std::max(max_diff, std::abs(theta[i] - p[i]));
      }
      // f32 accumulates rounding of ~1e-7 relative; int8 quantizes each pseudo-gradient to
      // 1/255 of its chunk's range (|Delta| <= 0.05 here: error <= 2e-4 per value, times
      // lr (1 + 2 mu) over two rounds).
      const double tol = wire == OuterWire::kF32 ? 1e-5 * max_abs : 2e-3;
      EXPECT_LE(max_diff, tol) << tag << " rank " << rank;
      // The log names who was left out of which step.
      if (rank == 0) {
        ASSERT_EQ(events.size(), 1u);
        EXPECT_NE(events[0].find("outer step 1: left out rank(s) [3]"), std::string::npos)
            << events[0];
      } else if (rank == 3) {
        ASSERT_EQ(events.size(), 1u);
        EXPECT_NE(events[0].find("outer step 1: this replica was left out (members [0,1,2])"),
                  std::string::npos)
            << events[0];
      } else {
        EXPECT_TRUE(events.empty());
      }
    });
    EXPECT_TRUE(AllRanksOk(result)) << tag;
  }
}

// Quorum 1 (all four), one retry: a replica stalled past both deadlines stops the step on every
// replica with a message, the stalled one included once it comes back.
TEST(DilocoQuorum, NoQuorumStopsEveryReplica) {
  TempDir dir;
  const std::string store_dir = dir.path();
  auto result = run_ranks(kWorld, 60s, [&](int rank) {
    auto store = std::make_shared<FileStore>(store_dir, 20s);
    std::vector<std::string> events;
    QuorumExchange q(store, kWorld, rank,
                     QuorumOptions{.quorum = 1.0, .deadline = 200ms, .retries = 1},
                     [&](const std::string& s) { events.push_back(s); });
    std::vector<float> p = start_params();
    DilocoOuter outer(DilocoConfig{}, p.data(), 0, kN);
    const std::vector<float> before = p;
    take_inner_steps(p, rank, 1);
    if (rank == 2) std::this_thread::sleep_for(1000ms);
    try {
      outer.outer_step(p.data(), q, "t1", "outer step 1");
      ADD_FAILURE() << "rank " << rank << ": the step went through without a quorum";
    } catch (const CommError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(rank == 0 ? "quorum not reached: only ranks [0,1,3]" : "no quorum"),
                std::string::npos)
          << what;
    }
    // Nothing was applied: theta_global is still the start.
    EXPECT_EQ(std::memcmp(outer.global(), before.data(), sizeof(float) * kN), 0);
    if (rank == 0) {
      ASSERT_EQ(events.size(), 1u);
      EXPECT_NE(events[0].find("retry 1 of 1"), std::string::npos) << events[0];
    }
  });
  EXPECT_TRUE(AllRanksOk(result));
}

TEST(DilocoQuorum, MembersListIsValidated) {
  EXPECT_EQ(parse_members("0,1,3", 4), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(parse_members("2", 4), (std::vector<int>{2}));
  EXPECT_EQ(format_members({0, 2, 3}), "0,2,3");
  for (const char* bad : {"", ",", "0,,1", "1,0", "0,0", "4", "-1", "0,1,x", "0 ,1", "!"}) {
    EXPECT_THROW(parse_members(bad, 4), PayloadError) << "\"" << bad << "\"";
  }
}

double max_difference(const std::vector<double>& theta, const std::vector<float>& p) {
  double d = 0;
  for (int64_t i = 0; i < kN; ++i) d = std::max(d, std::abs(theta[i] - p[i]));
  return d;
}

// Rank 3 steps 1000 times as far as it should (a poisoned or broken replica); every rank ends
// on the same theta_global, which matches a naive reference of the rule.
TEST(DilocoQuorum, RobustRulesHoldOffAPoisonedReplica) {
  TempDir dir;
  const std::string store_dir = dir.path();
  const std::vector<double> scale = {1, 1, 1, 1000};
  const Combine median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return 0.5 * (x[1] + x[2]);
  };
  const Combine trimmed = [](std::vector<double> x) {  // 4 values, 1 dropped at each end
    std::sort(x.begin(), x.end());
    return 0.5 * (x[1] + x[2]);
  };
  for (const std::string rule : {"mean", "median", "trimmed_mean"}) {
    auto result = run_ranks(kWorld, 60s, [&](int rank) {
      auto store = std::make_shared<FileStore>(store_dir, 20s);
      QuorumExchange q(std::make_shared<PrefixStore>(rule, store), kWorld, rank,
                       QuorumOptions{.quorum = 1.0, .deadline = 5s, .retries = 0}, nullptr);
      std::vector<float> p = start_params();
      DilocoOuter outer(DilocoConfig{.outer_lr = kLr,
                                     .momentum = kMu,
                                     .outer_rule = {.name = rule, .trim_fraction = 0.25}},
                        p.data(), 0, kN);
      for (int64_t i = 0; i < kN; ++i) {
        p[i] -= static_cast<float>(inner_step(rank, 1, i) * scale[static_cast<size_t>(rank)]);
      }
      outer.outer_step(p.data(), q, "t1", "outer step 1");
      EXPECT_TRUE(same_everywhere(*store, rule + "/check", rank, p)) << rule << " rank " << rank;
      std::vector<double> theta(kN), v(kN, 0.0), honest(kN), hv(kN, 0.0);
      for (int64_t i = 0; i < kN; ++i) theta[i] = honest[i] = static_cast<float>(initial(i));
      reference_round(theta, v, {0, 1, 2, 3}, 1,
                      rule == "median"         ? median
                      : rule == "trimmed_mean" ? trimmed
                                               : Combine(mean_of),
                      scale);
      reference_round(honest, hv, {0, 1, 2}, 1);
      EXPECT_LE(max_difference(theta, p), 1e-5) << rule << " rank " << rank;
      if (rule == "mean") {
        EXPECT_GT(max_difference(honest, p), 1.0) << "the poison does not move the mean";
      } else {
        EXPECT_LT(max_difference(honest, p), 0.05) << rule;
      }
    });
    EXPECT_TRUE(AllRanksOk(result)) << rule;
  }
}

TEST(DilocoQuorum, ANonFinitePseudoGradientIsLeftOutByEveryReplica) {
  TempDir dir;
  const std::string store_dir = dir.path();
  auto result = run_ranks(kWorld, 60s, [&](int rank) {
    auto store = std::make_shared<FileStore>(store_dir, 20s);
    std::vector<std::string> events;
    QuorumExchange q(store, kWorld, rank,
                     QuorumOptions{.quorum = 0.5, .deadline = 5s, .retries = 0},
                     [&](const std::string& s) { events.push_back(s); });
    std::vector<float> p = start_params();
    DilocoOuter outer(DilocoConfig{.outer_lr = kLr, .momentum = kMu}, p.data(), 0, kN);
    take_inner_steps(p, rank, 1);
    if (rank == 2) p[7] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<int> used = outer.outer_step(p.data(), q, "t1", "outer step 1");
    EXPECT_EQ(used, (std::vector<int>{0, 1, 3})) << "rank " << rank;
    EXPECT_TRUE(same_everywhere(*store, "check", rank, p)) << "rank " << rank;
    std::vector<double> theta(kN), v(kN, 0.0);
    for (int64_t i = 0; i < kN; ++i) theta[i] = static_cast<float>(initial(i));
    reference_round(theta, v, {0, 1, 3}, 1);
    EXPECT_LE(max_difference(theta, p), 1e-5) << "rank " << rank;
    bool named = false;
    for (const std::string& e : events)
      named |= e.find("rank 2 is not finite") != std::string::npos;
    EXPECT_TRUE(named) << "rank " << rank;
  });
  EXPECT_TRUE(AllRanksOk(result));
}

}  // namespace
}  // namespace brigade
