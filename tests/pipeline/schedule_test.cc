// Schedules as data: every schedule is well formed and deadlock-free (simulator), holds the
// activations its paper says, and its simulated bubble with unit costs equals the closed form.
#include "brigade/parallel/pipeline/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "brigade/base/error.h"
#include "brigade/parallel/pipeline/simulator.h"

namespace brigade {
namespace {

struct Case {
  ScheduleKind kind;
  int p, m, v;
};

std::string label(const Case& c) {
  return std::string(schedule_kind_name(c.kind)) + " p" + std::to_string(c.p) + " m" +
         std::to_string(c.m) + " v" + std::to_string(c.v);
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (int p : {1, 2, 3, 4, 8}) {
    for (int m : {1, 2, 3, 4, 5, 8, 12, 16}) {
      out.push_back({ScheduleKind::kGPipe, p, m, 1});
      out.push_back({ScheduleKind::k1F1B, p, m, 1});
      out.push_back({ScheduleKind::kZbH1, p, m, 1});
      for (int v : {1, 2, 3}) {
        if (m % p == 0) out.push_back({ScheduleKind::kInterleaved, p, m, v});
      }
    }
  }
  return out;
}

TEST(Schedule, EveryScheduleIsWellFormedAndDeadlockFree) {
  for (const Case& c : all_cases()) {
    const Schedule s = build_schedule(c.kind, {c.p, c.m, c.v});
    SimulationResult r;
    ASSERT_NO_THROW(r = simulate(s)) << label(c) << "\n" << describe_schedule(s);
    // F, B and W of every (micro-batch, chunk) on every rank: 3 m v unit actions.
    for (int rank = 0; rank < c.p; ++rank)
      EXPECT_DOUBLE_EQ(r.busy[rank], 3.0 * c.m * c.v) << label(c) << " rank " << rank;
  }
}

TEST(Schedule, ActivationsInFlight) {
  for (const Case& c : all_cases()) {
    const Schedule s = build_schedule(c.kind, {c.p, c.m, c.v});
    const SimulationResult r = simulate(s);
    const int peak = *std::max_element(r.peak_in_flight.begin(), r.peak_in_flight.end());
    for (int rank = 0; rank < c.p; ++rank) {
      const int got = r.peak_in_flight[rank];
      switch (c.kind) {
        case ScheduleKind::kGPipe:
          EXPECT_EQ(got, c.m) << label(c) << " rank " << rank;
          break;
        case ScheduleKind::k1F1B:
          // PipeDream-flush: rank r holds at most p - r micro-batches.
          EXPECT_EQ(got, std::min(c.p - rank, c.m)) << label(c) << " rank " << rank;
          break;
        case ScheduleKind::kZbH1:
          EXPECT_LE(got, c.p) << label(c) << " rank " << rank;
          break;
        case ScheduleKind::kInterleaved:
          // Megatron's warm-up plus the one forward of the first steady step (with m == p
          // every forward is warm-up).
          EXPECT_LE(got, c.m == c.p
                             ? c.m * c.v
                             : std::min(c.m * c.v, (c.p - rank - 1) * 2 + (c.v - 1) * c.p + 1))
              << label(c) << " rank " << rank;
          break;
      }
    }
    // ZB-H1's peak equals 1F1B's (rank 0 holds min(p, m)).
    if (c.kind == ScheduleKind::kZbH1) {
      EXPECT_EQ(peak, std::min(c.p, c.m)) << label(c);
    }
  }
}

TEST(Schedule, SimulatedBubbleEqualsTheoryWithUnitCosts) {
  for (const Case& c : all_cases()) {
    // ZB-H1's closed form assumes the pipeline fills: at least p micro-batches.
    if (c.kind == ScheduleKind::kZbH1 && c.m < c.p) continue;
    const Schedule s = build_schedule(c.kind, {c.p, c.m, c.v});
    const SimulationResult r = simulate(s);
    const double theory = theoretical_bubble(c.kind, {c.p, c.m, c.v});
    for (int rank = 0; rank < c.p; ++rank)
      EXPECT_NEAR(r.bubble[rank], theory, 1e-12) << label(c) << " rank " << rank << "\n"
                                                 << render_timeline(s, r);
  }
}

TEST(Schedule, ZeroBubbleBeatsOneFOneBAndInterleavingShrinksTheBubble) {
  const double gpipe = simulate(build_schedule(ScheduleKind::kGPipe, {4, 8, 1})).max_bubble();
  const double ofob = simulate(build_schedule(ScheduleKind::k1F1B, {4, 8, 1})).max_bubble();
  const double inter = simulate(build_schedule(ScheduleKind::kInterleaved, {4, 8, 2})).max_bubble();
  const double zb = simulate(build_schedule(ScheduleKind::kZbH1, {4, 8, 1})).max_bubble();
  EXPECT_DOUBLE_EQ(gpipe, ofob);
  EXPECT_LT(inter, ofob);
  EXPECT_LT(zb, inter);
  // ZB-H1 with unit costs: a third of 1F1B's bubble time (p - 1 instead of 3 (p - 1)).
  EXPECT_NEAR(zb, 3.0 / 27.0, 1e-12);
}

TEST(Schedule, SimulatorCountsCostsAndLatency) {
  // GPipe: the forward wave crosses p - 1 messages, so does the backward wave; the last rank runs
  // all its backwards back to back, and so does every rank behind it.
  const ActionCosts costs{.forward = 1.0, .backward_input = 1.5, .backward_weight = 0.5};
  const int p = 4, m = 8;
  const double latency = 0.25;
  const SimulationResult r = simulate(build_schedule(ScheduleKind::kGPipe, {p, m, 1}),
                                      {.costs = costs, .comm_latency = latency});
  EXPECT_DOUBLE_EQ(r.makespan, (m + p - 1) * (1.0 + 2.0) + 2 * (p - 1) * latency);
  for (int rank = 0; rank < p; ++rank) EXPECT_DOUBLE_EQ(r.busy[rank], m * 3.0);
}

TEST(Schedule, OneFOneBOrderMatchesPipeDreamFlush) {
  const Schedule s = build_schedule(ScheduleKind::k1F1B, {4, 6, 1});
  EXPECT_EQ(describe_schedule(s),
            "rank 0: F0 F1 F2 F3 BW0 F4 BW1 F5 BW2 BW3 BW4 BW5\n"
            "rank 1: F0 F1 F2 BW0 F3 BW1 F4 BW2 F5 BW3 BW4 BW5\n"
            "rank 2: F0 F1 BW0 F2 BW1 F3 BW2 F4 BW3 F5 BW4 BW5\n"
            "rank 3: F0 BW0 F1 BW1 F2 BW2 F3 BW3 F4 BW4 F5 BW5\n");
}

TEST(Schedule, ZbH1OrderMatchesThePaper) {
  // Qi et al. 2023, figure 3 (ZB-H1, p = 4).
  const Schedule s = build_schedule(ScheduleKind::kZbH1, {4, 6, 1});
  EXPECT_EQ(describe_schedule(s),
            "rank 0: F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5\n"
            "rank 1: F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 B4 W3 B5 W4 W5\n"
            "rank 2: F0 F1 B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 B5 W3 W4 W5\n"
            "rank 3: F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5\n");
}

TEST(Schedule, InterleavedOrderMatchesMegatron) {
  // p = 2, v = 2, m = 4: micro-batches in groups of p, chunk 0 then chunk 1.
  const Schedule s = build_schedule(ScheduleKind::kInterleaved, {2, 4, 2});
  EXPECT_EQ(describe_schedule(s),
            "rank 0: F0.0 F1.0 F0.1 F1.1 F2.0 BW0.1 F3.0 BW1.1 F2.1 BW0.0 F3.1 BW1.0 BW2.1 "
            "BW3.1 BW2.0 BW3.0\n"
            "rank 1: F0.0 F1.0 F0.1 BW0.1 F1.1 BW1.1 F2.0 BW0.0 F3.0 BW1.0 F2.1 BW2.1 F3.1 "
            "BW3.1 BW2.0 BW3.0\n");
}

TEST(Schedule, TransfersConnectNeighbouringStages) {
  const Schedule s = build_schedule(ScheduleKind::kInterleaved, {4, 4, 2});
  for (int r = 0; r < 4; ++r) {
    for (const Action& a : s.ranks[r]) {
      const int stage = s.global_stage(r, a.chunk);
      if (a.kind == ActionKind::kForward) {
        EXPECT_EQ(a.recv_from, stage == 0 ? -1 : (r + 3) % 4);
        EXPECT_EQ(a.send_to, stage == 7 ? -1 : (r + 1) % 4);
      } else {
        EXPECT_EQ(a.recv_from, stage == 7 ? -1 : (r + 1) % 4);
        EXPECT_EQ(a.send_to, stage == 0 ? -1 : (r + 3) % 4);
      }
    }
  }
}

void expect_config_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no ConfigError; wanted one mentioning \"" << needle << "\"";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Schedule, InvalidShapesAreRejectedWithTheReason) {
  expect_config_error(
      [] {
        build_schedule(ScheduleKind::kInterleaved, {4, 6, 2});
      },
      "micro_batches = 6 must be a multiple of pp = 4");
  expect_config_error(
      [] {
        build_schedule(ScheduleKind::k1F1B, {4, 8, 2});
      },
      "virtual_stages = 2 must be 1");
  expect_config_error([] { build_schedule(ScheduleKind::kGPipe, {0, 8, 1}); }, "pp (ranks) = 0");
  expect_config_error([] { build_schedule(ScheduleKind::kZbH1, {2, 0, 1}); }, "micro_batches = 0");
  expect_config_error(
      [] {
        validate_schedule(ScheduleKind::kInterleaved, {4, 8, 2}, 6);
      },
      "8 stages (pp = 4 x virtual_stages = 2) but the model has only 6 layers");
  expect_config_error([] { parse_schedule_kind("zb-h2"); }, "allowed: gpipe, 1f1b");
  EXPECT_EQ(parse_schedule_kind("zb-h1"), ScheduleKind::kZbH1);
  EXPECT_NO_THROW(validate_schedule(ScheduleKind::kInterleaved, {4, 8, 2}, 8));
}

TEST(Schedule, SimulatorRejectsBrokenSchedules) {
  // Rank 2 waits for micro-batch 0's gradient before forwarding micro-batch 3, which rank 3
  // needs before it computes that gradient.
  Schedule s = build_schedule(ScheduleKind::kGPipe, {4, 4, 1});
  std::swap(s.ranks[2][3], s.ranks[2][4]);
  expect_config_error([&] { simulate(s); }, "deadlock");

  Schedule early = build_schedule(ScheduleKind::k1F1B, {2, 2, 1});
  std::swap(early.ranks[1][0], early.ranks[1][1]);  // BW0 before F0
  expect_config_error([&] { simulate(early); }, "rank 1 BW mb 0 chunk 0: runs before its forward");

  Schedule missing = build_schedule(ScheduleKind::kZbH1, {2, 3, 1});
  missing.ranks[0].pop_back();  // drops the last W
  expect_config_error([&] { simulate(missing); }, "never finishes");

  Schedule unmatched = build_schedule(ScheduleKind::k1F1B, {2, 2, 1});
  unmatched.ranks[0][0].send_tag += 1000;
  expect_config_error([&] { simulate(unmatched); }, "no single matching receive");
}

}  // namespace
}  // namespace brigade
