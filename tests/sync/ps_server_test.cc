// One parameter server driven message by message (no sockets): BSP's update against a naive
// mean-then-SGD-with-momentum reference, SSP's pull rule and staleness record, ASP, and the
// refusal of every message that does not fit the server's state (the state is read back
// afterwards and must be unchanged). The wire checks of decode_ps_message are tested here too.
#include "brigade/sync/ps/ps_server.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "brigade/tensor/param_spec.h"
#include "brigade/tensor/rng.h"

namespace brigade::ps_server_test {
namespace {

constexpr uint64_t kTag = 0xfeedbeefcafe1234ull;

ParamLayout layout() {
  ParamLayout l;
  l.add({.name = "w", .shape = {4, 5}, .weight_decay = true});
  l.add({.name = "b", .shape = {7}, .weight_decay = false});
  return l;
}

std::vector<float> random_vector(int64_t n, uint64_t key) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_normal(v.data(), n, 0.0f, 1.0f, 99, key);
  return v;
}

// A server over [begin, end) of layout() with SGD (momentum 0.9, weight decay 0.1), and the
// replies it sent, decoded, per worker.
class Server {
 public:
  Server(PsConsistency consistency, int workers, int64_t begin, int64_t end, int64_t staleness = 0,
         bool dynamic = false, int aggregate = 1, int64_t cut_every = 0, int64_t steps = 0)
      : begin_(begin),
        end_(end),
        server_(PsServerOptions{.index = 0,
                                .workers = workers,
                                .begin = begin,
                                .end = end,
                                .consistency = consistency,
                                .staleness = staleness,
                                .run_tag = kTag,
                                .dynamic = dynamic,
                                .aggregate = aggregate,
                                .cut_every = cut_every,
                                .steps = steps},
                layout(), OptimizerConfig{.name = "sgd", .weight_decay = 0.1f, .momentum = 0.9f},
                [this](const std::string& line) { log_.push_back(line); }) {}

  void send(int worker, PsType type, int64_t clock, const std::vector<float>& payload = {},
            float lr = 0, int64_t updates = 0, uint32_t flags = 0, int64_t read_clock = 0,
            float scale = 1, int64_t next_clock = 0) {
    PsHeader h;
    h.type = static_cast<uint32_t>(type);
    h.worker = static_cast<uint32_t>(worker);
    h.run_tag = kTag;
    h.clock = clock;
    h.read_clock = read_clock;
    h.lr = lr;
    h.scale = scale;
    h.updates = updates;
    h.flags = flags;
    h.count = static_cast<int64_t>(payload.size());
    h.next_clock = next_clock;
    server_.handle(worker, encode_ps_message(h, payload.data()), reply());
  }
  void send_frames(int worker, zmq::multipart_t&& frames) {
    server_.handle(worker, std::move(frames), reply());
  }
  ParameterServer::Reply reply() {
    return [this](int worker, zmq::multipart_t&& frames) {
      std::string why;
      auto m = decode_ps_message(std::move(frames), kTag, 1 << 20, &why);
      ASSERT_TRUE(m) << why;
      replies_[worker].push_back(std::move(*m));
    };
  }
  // Parameters and momentum as the server holds them (through kStateGet), for a save of `step`.
  std::vector<float> state(int64_t step = 0, PsHeader* reply_header = nullptr) {
    send(0, PsType::kStateGet, 0, {}, 0, step);
    PsMessage m = std::move(replies_[0].back());
    replies_[0].pop_back();
    EXPECT_EQ(m.header.type, static_cast<uint32_t>(PsType::kState));
    if (reply_header) *reply_header = m.header;
    return std::vector<float>(m.payload, m.payload + m.header.count);
  }
  std::vector<PsMessage>& replies(int worker) { return replies_[worker]; }
  ParameterServer& server() { return server_; }
  const std::vector<std::string>& log() const { return log_; }
  int64_t n() const { return end_ - begin_; }

 private:
  int64_t begin_, end_;
  std::vector<std::string> log_;
  std::map<int, std::vector<PsMessage>> replies_;
  ParameterServer server_;
};

// SGD with momentum and L2 weight decay, the textbook loop over the mean gradient.
void naive_sgd(std::vector<float>& p, std::vector<float>& m, const std::vector<float>& g,
               int64_t begin, float lr) {
  const ParamLayout l = layout();
  for (size_t i = 0; i < p.size(); ++i) {
    const int64_t flat = begin + static_cast<int64_t>(i);
    const bool decay = flat < l.at("w").numel;
    const float grad = g[i] + (decay ? 0.1f * p[i] : 0.0f);
    m[i] = 0.9f * m[i] + grad;
    p[i] -= lr * m[i];
  }
}

TEST(ParameterServer, BspAppliesTheMeanOfEveryWorkerOnce) {
  const int64_t begin = 9, end = 27;  // cuts through both tensors
  Server s(PsConsistency::kBsp, 3, begin, end);
  const int64_t n = s.n();
  std::vector<float> params = random_vector(n, 1), momentum(static_cast<size_t>(n), 0.0f);
  std::vector<float> init = params;
  init.insert(init.end(), momentum.begin(), momentum.end());
  s.send(0, PsType::kInit, 0, init);
  ASSERT_EQ(s.replies(0).size(), 1u);
  EXPECT_EQ(s.replies(0)[0].header.type, static_cast<uint32_t>(PsType::kAck));
  for (int64_t clock = 0; clock < 3; ++clock) {
    std::vector<std::vector<float>> g;
    std::vector<float> mean(static_cast<size_t>(n), 0.0f);
    for (int w = 0; w < 3; ++w) {
      g.push_back(random_vector(n, 100 + static_cast<uint64_t>(clock * 3 + w)));
      for (size_t i = 0; i < mean.size(); ++i) mean[i] += g.back()[i] / 3.0f;
    }
    for (int w : {2, 0, 1}) s.send(w, PsType::kPush, clock, g[static_cast<size_t>(w)]);
    double expected_sq = 0;
    for (float v : mean) expected_sq += static_cast<double>(v) * v;
    for (int w = 0; w < 3; ++w) {
      ASSERT_FALSE(s.replies(w).empty());
      const PsMessage& norm = s.replies(w).back();
      EXPECT_EQ(norm.header.type, static_cast<uint32_t>(PsType::kNorm));
      EXPECT_NEAR(norm.header.value, expected_sq, 1e-5 * expected_sq);
    }
    const float lr = 0.05f * static_cast<float>(clock + 1), scale = 0.5f;
    for (int w = 0; w < 3; ++w) s.send(w, PsType::kApply, clock, {}, lr, clock + 1, 0, 0, scale);
    for (float& v : mean) v *= scale;
    naive_sgd(params, momentum, mean, begin, lr);
    for (int w = 0; w < 3; ++w) {
      const PsMessage& p = s.replies(w).back();
      ASSERT_EQ(p.header.type, static_cast<uint32_t>(PsType::kParams));
      EXPECT_EQ(p.header.clock, clock + 1);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(p.payload[i], params[static_cast<size_t>(i)], 1e-5f) << "clock " << clock;
      }
    }
  }
  EXPECT_EQ(s.server().staleness().applied, 3);
  EXPECT_EQ(s.server().staleness().max, 0);
  EXPECT_EQ(s.server().refused(), 0);
}

TEST(ParameterServer, BspSkipAdvancesTheClockWithoutAnUpdate) {
  Server s(PsConsistency::kBsp, 2, 0, 27);
  const std::vector<float> before = random_vector(2 * 27, 3);
  s.send(0, PsType::kInit, 0, before);
  for (int w = 0; w < 2; ++w) s.send(w, PsType::kPush, 0, random_vector(27, 4));
  for (int w = 0; w < 2; ++w) s.send(w, PsType::kApply, 0, {}, 0.1f, 1, kPsFlagSkip);
  EXPECT_EQ(s.replies(1).back().header.clock, 1);
  EXPECT_EQ(s.state(), before);
  EXPECT_EQ(s.server().staleness().applied, 0);
}

TEST(ParameterServer, SspAnswersAPullOnlyWithinTheStalenessBound) {
  Server s(PsConsistency::kSsp, 2, 0, 27, /*staleness=*/1);
  s.send(0, PsType::kInit, 0, std::vector<float>(2 * 27, 0.5f));
  s.replies(0).clear();
  s.send(0, PsType::kPull, 0);
  s.send(1, PsType::kPull, 0);
  ASSERT_EQ(s.replies(0).size(), 1u);
  ASSERT_EQ(s.replies(1).size(), 1u);
  const std::vector<float> g(27, 1.0f);
  // Worker 0 runs ahead: its pushes of clocks 0 and 1 carry the pull of clocks 1 and 2. Clock 1
  // is within the bound (every worker has completed clock 0 >= 1 - 1), clock 2 is not.
  s.send(0, PsType::kPushApply, 0, g, 0.1f, 1, 0, /*read_clock=*/0);
  EXPECT_EQ(s.replies(0).size(), 2u);
  s.send(0, PsType::kPushApply, 1, g, 0.1f, 2, 0, s.replies(0).back().header.clock);
  EXPECT_EQ(s.replies(0).size(), 2u) << "a pull two clocks ahead of worker 1 must wait";
  // Worker 1 completes clock 0: worker 0's pull of clock 2 is now answered.
  s.send(1, PsType::kPushApply, 0, g, 0.1f, 1, 0, 0);
  EXPECT_EQ(s.replies(0).size(), 3u);
  EXPECT_EQ(s.replies(0).back().header.clock, 1);
  // Staleness: worker 0's clock-1 push read at 0 (stale by 1); the others were fresh.
  const PsStalenessRecord& r = s.server().staleness();
  EXPECT_EQ(r.applied, 3);
  EXPECT_EQ(r.max, 1);
  EXPECT_EQ(r.counts[0], 2);
  EXPECT_EQ(r.counts[1], 1);
  // Each push is one SGD step with lr / N: three pushes of 1 moved every value by 3 x 0.05 x ...
  std::vector<float> p(27, 0.5f), m(27, 0.5f);
  for (int k = 0; k < 3; ++k) naive_sgd(p, m, g, 0, 0.05f);
  const std::vector<float> state = s.state();
  for (size_t i = 0; i < 27; ++i) EXPECT_NEAR(state[i], p[i], 1e-6f);
}

TEST(ParameterServer, AspNeverWaits) {
  Server s(PsConsistency::kAsp, 2, 0, 27);
  s.send(0, PsType::kInit, 0, std::vector<float>(2 * 27, 0.0f));
  const std::vector<float> g(27, 1.0f);
  for (int64_t c = 0; c < 5; ++c) s.send(0, PsType::kPushApply, c, g, 0.1f, c + 1, 0, 0);
  EXPECT_EQ(s.replies(0).size(), 6u);  // ack + 5 pulls, worker 1 never pushed
  EXPECT_EQ(s.server().staleness().max, 4);
}

// ps.aggregate = K: the server sums pushes and applies every K as one optimizer step on their
// mean with lr K / N, at the newest push's schedule; a pull in between reads the parameters
// without the open group; a partial group is applied before the state is read and once no
// worker trains any more. Reference: the textbook SGD loop on the groups' means.
TEST(ParameterServer, AggregateAppliesEveryKPushesAsOneStepOnTheirMean) {
  const int64_t begin = 9, end = 27;  // cuts through both tensors
  Server s(PsConsistency::kAsp, 3, begin, end, 0, false, /*aggregate=*/2);
  const int64_t n = s.n();
  std::vector<float> p = random_vector(n, 1), m(static_cast<size_t>(n), 0.0f);
  std::vector<float> init = p;
  init.insert(init.end(), m.begin(), m.end());
  s.send(0, PsType::kInit, 0, init);
  std::vector<std::vector<float>> g;
  for (uint64_t k = 0; k < 6; ++k) g.push_back(random_vector(n, 200 + k));
  const auto mean = [&](size_t a, size_t b) {
    std::vector<float> out(static_cast<size_t>(n));
    for (size_t i = 0; i < out.size(); ++i) out[i] = (g[a][i] + g[b][i]) / 2.0f;
    return out;
  };
  // Workers 0 and 1 form the first group (the newer push, update 2, sets lr 0.3).
  s.send(0, PsType::kPushApply, 0, g[0], 0.3f, 2, 0, 0);
  s.send(1, PsType::kPushApply, 0, g[1], 0.6f, 1, 0, 0);
  naive_sgd(p, m, mean(0, 1), begin, 0.3f * 2 / 3);
  // Worker 2's push opens the next group: the pull it carries reads the parameters without it.
  s.send(2, PsType::kPushApply, 0, g[2], 0.3f, 3, 0, 0);
  const PsMessage& read = s.replies(2).back();
  ASSERT_EQ(read.header.type, static_cast<uint32_t>(PsType::kParams));
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(read.payload[i], p[static_cast<size_t>(i)], 1e-6f);
  s.send(0, PsType::kPushApply, 1, g[3], 0.3f, 4, 0, 0);
  naive_sgd(p, m, mean(2, 3), begin, 0.3f * 2 / 3);
  // A state read applies the open group of one push (lr 1 / N).
  s.send(1, PsType::kPushApply, 1, g[4], 0.3f, 5, 0, 0);
  naive_sgd(p, m, g[4], begin, 0.3f / 3);
  std::vector<float> state = s.state();
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(state[static_cast<size_t>(i)], p[i], 1e-5f) << i;
  EXPECT_EQ(s.server().staleness().applied, 5);
  EXPECT_EQ(s.server().refused(), 0);

  // Dynamic assignment: the last slice's push waits for a partner until every worker is out of
  // slices; worker 0's drain then reads it applied.
  Server d(PsConsistency::kSsp, 2, 0, 27, /*staleness=*/1, /*dynamic=*/true, /*aggregate=*/2);
  std::vector<float> q(27, 0.5f), v(27, 0.0f);
  init = q;
  init.insert(init.end(), v.begin(), v.end());
  d.send(0, PsType::kInit, 0, init);
  for (int w = 0; w < 2; ++w) d.send(w, PsType::kPull, 0);
  const std::vector<float> g0(27, 1.0f), g1(27, -3.0f), g2(27, 2.0f), g01(27, -1.0f);
  d.send(0, PsType::kPushApply, 0, g0, 0.2f, 1, 0, 0, 1, /*next_clock=*/1);
  d.send(1, PsType::kPushApply, 0, g1, 0.2f, 1, kPsFlagNoNext, 0);
  naive_sgd(q, v, g01, 0, 0.2f);
  d.send(0, PsType::kPushApply, 1, g2, 0.2f, 2, kPsFlagNoNext, 1);
  d.send(0, PsType::kPull, 0, {}, 0, 0, kPsFlagDrain);
  naive_sgd(q, v, g2, 0, 0.1f);
  const PsMessage& drained = d.replies(0).back();
  ASSERT_EQ(drained.header.type, static_cast<uint32_t>(PsType::kParams));
  for (size_t i = 0; i < 27; ++i) EXPECT_NEAR(drained.payload[i], q[i], 1e-5f) << i;
  EXPECT_EQ(d.server().refused(), 0) << d.log().back();
}

// Checkpoints under ssp are consistent cuts: with ckpt_every = 2 over 5 steps the cuts are steps
// 2, 4 and 5. A pull at or past the next cut waits (though the bound s = 3 would allow it) until
// every worker has completed the clocks before it; the server then copies its state, which a
// save of that step gets, flagged, while a save of another step gets the state of the moment.
TEST(ParameterServer, SspHoldsPullsAtACheckpointStepAndSavesTheCut) {
  Server s(PsConsistency::kSsp, 2, 0, 27, /*staleness=*/3, false, 1, /*cut_every=*/2,
           /*steps=*/5);
  s.send(0, PsType::kInit, 0, std::vector<float>(2 * 27, 0.5f));
  for (int w = 0; w < 2; ++w) s.send(w, PsType::kPull, 0);
  s.replies(0).clear();
  const std::vector<float> g(27, 1.0f);
  const auto push = [&](int w, int64_t clock) {
    s.send(w, PsType::kPushApply, clock, g, 0.2f, clock + 1, 0, /*read_clock=*/0);
  };
  push(0, 0);
  EXPECT_EQ(s.replies(0).size(), 1u) << "clock 1 is before the cut";
  push(0, 1);
  EXPECT_EQ(s.replies(0).size(), 1u) << "clock 2 is the cut: held until worker 1 completes 1";
  push(1, 0);
  EXPECT_EQ(s.replies(0).size(), 1u);
  push(1, 1);
  ASSERT_EQ(s.replies(0).size(), 2u);
  ASSERT_EQ(s.replies(1).size(), 3u);
  push(0, 2);  // past the cut: applied to the live state only
  EXPECT_EQ(s.replies(0).size(), 3u);
  std::vector<float> p(27, 0.5f), m(27, 0.5f);
  for (int k = 0; k < 4; ++k) naive_sgd(p, m, g, 0, 0.1f);
  PsHeader h;
  const std::vector<float> cut = s.state(/*step=*/2, &h);
  EXPECT_EQ(h.flags & kPsFlagCut, kPsFlagCut);
  EXPECT_EQ(h.updates, 4) << "the pushes of clocks 0 and 1";
  for (size_t i = 0; i < 27; ++i) EXPECT_NEAR(cut[i], p[i], 1e-6f) << i;
  s.state(/*step=*/3, &h);
  EXPECT_EQ(h.flags & kPsFlagCut, 0u) << "step 3 is no checkpoint step";
  EXPECT_EQ(h.updates, 5);
  EXPECT_EQ(s.server().refused(), 0);
}

TEST(ParameterServer, RefusesWhatDoesNotFitAndChangesNothing) {
  Server s(PsConsistency::kBsp, 2, 0, 27);
  s.send(0, PsType::kPush, 0, std::vector<float>(27, 1.0f));  // before init
  const std::vector<float> init = random_vector(2 * 27, 5);
  s.send(1, PsType::kInit, 0, init);                          // init from another worker than 0
  s.send(0, PsType::kInit, 0, std::vector<float>(10, 1.0f));  // wrong size
  EXPECT_EQ(s.server().refused(), 3);
  s.send(0, PsType::kInit, 0, init);
  s.send(0, PsType::kInit, 0, init);                                        // twice
  s.send(0, PsType::kPush, 3, std::vector<float>(27, 1.0f));                // clock out of order
  s.send(0, PsType::kPush, 0, std::vector<float>(26, 1.0f));                // wrong range size
  s.send(0, PsType::kPushApply, 0, std::vector<float>(27, 1.0f), 0.1f, 1);  // ssp's message
  s.send(0, PsType::kApply, 0, {}, 0.1f, 1);  // apply before every push
  s.send(0, PsType::kNorm, 0);                // a server's message
  // A worker claiming another's identity, and an unknown worker.
  PsHeader h;
  h.type = static_cast<uint32_t>(PsType::kPull);
  h.worker = 1;
  h.run_tag = kTag;
  s.send_frames(0, encode_ps_message(h, nullptr));
  h.worker = 7;
  s.send_frames(7, encode_ps_message(h, nullptr));
  // Another run's message.
  h.worker = 0;
  h.run_tag = kTag + 1;
  s.send_frames(0, encode_ps_message(h, nullptr));
  EXPECT_EQ(s.server().refused(), 12);
  // Two workers that disagree on the update: the second apply is refused.
  for (int w = 0; w < 2; ++w) s.send(w, PsType::kPush, 0, std::vector<float>(27, 1.0f));
  s.send(0, PsType::kApply, 0, {}, 0.1f, 1);
  s.send(1, PsType::kApply, 0, {}, 0.2f, 1);
  EXPECT_EQ(s.server().refused(), 13);
  EXPECT_EQ(s.state(), init);
  EXPECT_EQ(s.log().size(), 13u);
  EXPECT_NE(s.log().back().find("differs from worker 0"), std::string::npos) << s.log().back();
}

// Joining (a worker restarted into a running ssp/asp job): a join before init waits for it
// and learns the invocation's start step; a join later learns the clocks the server has for the
// worker, which may continue there or one ahead (it died between two servers' pushes), not
// further; worker 0 never joins.
TEST(ParameterServer, AJoiningWorkerContinuesAtTheClockTheServerHasForIt) {
  Server s(PsConsistency::kAsp, 2, 0, 27);
  const int64_t n = s.n();
  std::vector<float> init = random_vector(2 * n, 3);
  s.send(1, PsType::kJoin, 0);
  EXPECT_TRUE(s.replies(1).empty()) << "a join before init must wait for it";
  s.send(0, PsType::kInit, 0, init, 0, /*updates=*/40);
  ASSERT_EQ(s.replies(1).size(), 1u);
  EXPECT_EQ(s.replies(1)[0].header.type, static_cast<uint32_t>(PsType::kJoined));
  EXPECT_EQ(s.replies(1)[0].header.clock, 0);
  EXPECT_EQ(s.replies(1)[0].header.updates, 40);
  EXPECT_EQ(s.replies(1)[0].header.flags & kPsFlagRejoin, 0u) << "a first join is no rejoin";
  s.send(1, PsType::kPull, 0, {}, 0, 0, kPsFlagRejoin);
  const std::vector<float> g = random_vector(n, 4);
  s.send(1, PsType::kPushApply, 0, g, 0.1f, 41, 0, 0);
  s.send(1, PsType::kPushApply, 1, g, 0.1f, 42, 0, 1);
  EXPECT_EQ(s.server().refused(), 0) << s.log().back();
  EXPECT_EQ(s.server().workers_joined(), 0);

  s.replies(1).clear();
  s.send(1, PsType::kJoin, 0);  // restarted
  ASSERT_EQ(s.replies(1).size(), 1u);
  EXPECT_EQ(s.replies(1)[0].header.clock, 2);
  EXPECT_EQ(s.replies(1)[0].header.flags & kPsFlagRejoin, kPsFlagRejoin);
  EXPECT_EQ(s.server().workers_joined(), 1);
  s.send(1, PsType::kPull, 4, {}, 0, 0, kPsFlagRejoin);
  EXPECT_EQ(s.server().refused(), 1) << "two clocks ahead";
  s.send(1, PsType::kPull, 3, {}, 0, 0, kPsFlagRejoin);
  EXPECT_EQ(s.replies(1).back().header.type, static_cast<uint32_t>(PsType::kParams));
  s.send(1, PsType::kPushApply, 3, g, 0.1f, 43, 0, 3);
  EXPECT_EQ(s.server().refused(), 1) << s.log().back();
  s.send(1, PsType::kPull, 5, {}, 0, 0);
  EXPECT_EQ(s.server().refused(), 2) << "only a pull after a join may skip ahead";
  s.send(0, PsType::kJoin, 0);
  EXPECT_EQ(s.server().refused(), 3);
  EXPECT_NE(s.log().back().find("does not join"), std::string::npos) << s.log().back();
}

// Dynamic assignment (ps.assignment = "dynamic"): clocks are the global steps of the slices
// workers take, starting at the invocation's step; a pull declares one, a push carries the
// next, which may repeat or jump but not go back; the bound is "every slice still in training
// is of step c - s or later"; a worker's last push takes it out of the bound, and worker 0's
// drain is answered once every other worker is out.
TEST(ParameterServer, DynamicClocksAreGlobalStepsAndTheDrainWaitsForEveryWorker) {
  Server s(PsConsistency::kSsp, 3, 0, 27, /*staleness=*/1, /*dynamic=*/true);
  const std::vector<float> g(27, 1.0f);
  const auto push = [&](int w, int64_t clock, int64_t read, int64_t next, bool last = false) {
    s.send(w, PsType::kPushApply, clock, g, 0.3f, clock + 1, last ? kPsFlagNoNext : 0, read, 1,
           next);
  };
  s.send(0, PsType::kPull, 0, {}, 0, 0, kPsFlagDrain);  // out of order: before init and slices
  s.send(0, PsType::kInit, 0, std::vector<float>(2 * 27, 0.5f), 0, /*updates=*/10);
  s.replies(0).clear();
  s.send(1, PsType::kPull, 9);  // before the invocation's first step
  EXPECT_EQ(s.server().refused(), 2) << s.log().back();
  for (int w = 0; w < 3; ++w) s.send(w, PsType::kPull, 10);
  for (int w = 0; w < 3; ++w) ASSERT_EQ(s.replies(w).size(), 1u) << w;
  // Worker 0 takes slices of steps 11 and then 12; 12 waits for workers 1 and 2 at step 10.
  push(0, 10, 10, 11);
  EXPECT_EQ(s.replies(0).size(), 2u);
  push(0, 11, 10, 12);
  EXPECT_EQ(s.replies(0).size(), 2u) << "a slice two steps ahead of the slowest must wait";
  push(1, 10, 10, 9);  // the next slice before its own: refused, nothing applied
  EXPECT_EQ(s.server().refused(), 3) << s.log().back();
  push(1, 10, 10, 12);  // jumps: the others took the slices between
  EXPECT_EQ(s.replies(0).size(), 2u) << "worker 2 still trains a slice of step 10";
  push(2, 10, 10, 0, /*last=*/true);  // out of slices: out of the bound
  ASSERT_EQ(s.replies(0).size(), 3u);
  ASSERT_EQ(s.replies(1).size(), 2u);
  EXPECT_EQ(s.replies(0).back().header.clock, 12);
  EXPECT_TRUE(s.replies(2).size() == 1u) << "a last push pulls nothing";
  // Worker 0's last slice, then its drain, which waits for worker 1's last push.
  push(0, 12, 12, 0, true);
  s.send(1, PsType::kPull, 0, {}, 0, 0, kPsFlagDrain);
  EXPECT_EQ(s.server().refused(), 4) << "only worker 0 drains";
  s.send(0, PsType::kPull, 0, {}, 0, 0, kPsFlagDrain);
  EXPECT_EQ(s.replies(0).size(), 3u);
  push(1, 12, 12, 0, true);
  ASSERT_EQ(s.replies(0).size(), 4u);
  EXPECT_EQ(s.replies(0).back().header.type, static_cast<uint32_t>(PsType::kParams));
  // Six slices applied, one SGD step of lr / N each; worker 0's step-11 slice read at 10.
  const PsStalenessRecord& r = s.server().staleness();
  EXPECT_EQ(r.applied, 6);
  EXPECT_EQ(r.max, 1);
  std::vector<float> p(27, 0.5f), m(27, 0.5f);
  for (int k = 0; k < 6; ++k) naive_sgd(p, m, g, 0, 0.1f);
  const std::vector<float> state = s.state();
  for (size_t i = 0; i < 27; ++i) EXPECT_NEAR(state[i], p[i], 1e-6f);
  EXPECT_EQ(s.server().refused(), 4);

  // A server of static assignment refuses what only dynamic assignment sends.
  Server fixed(PsConsistency::kSsp, 2, 0, 27, 1);
  fixed.send(0, PsType::kInit, 0, std::vector<float>(2 * 27, 0.5f));
  fixed.send(0, PsType::kPull, 0);
  fixed.send(0, PsType::kPushApply, 0, g, 0.1f, 1, 0, 0, 1, /*next_clock=*/1);
  fixed.send(0, PsType::kPushApply, 0, g, 0.1f, 1, kPsFlagNoNext, 0);
  fixed.send(0, PsType::kPull, 0, {}, 0, 0, kPsFlagDrain);
  EXPECT_EQ(fixed.server().refused(), 3);
}

TEST(PsMessage, MalformedFramesAreRefusedWithAReason) {
  PsHeader h;
  h.type = static_cast<uint32_t>(PsType::kPush);
  h.run_tag = kTag;
  h.count = 4;
  const std::vector<float> v = {1, 2, 3, 4};
  struct Case {
    const char* expect;
    zmq::multipart_t frames;
  };
  std::vector<Case> cases;
  cases.push_back({"0 frames", zmq::multipart_t()});
  {
    zmq::multipart_t f;
    f.addmem(&h, 10);
    cases.push_back({"header of 10 bytes", std::move(f)});
  }
  auto with = [&](auto mutate) {
    PsHeader x = h;
    mutate(x);
    return encode_ps_message(x, v.data());
  };
  cases.push_back({"bad magic", with([](PsHeader& x) { x.magic = 0; })});
  cases.push_back({"protocol version 9", with([](PsHeader& x) { x.version = 9; })});
  cases.push_back({"unknown message type 12", with([](PsHeader& x) { x.type = 12; })});
  cases.push_back({"another run", with([](PsHeader& x) { x.run_tag = 1; })});
  cases.push_back({"at most 8 accepted", with([](PsHeader& x) { x.count = 9; })});
  cases.push_back({"lr or scale", with([](PsHeader& x) { x.lr = std::nanf(""); })});
  cases.push_back({"negative clock", with([](PsHeader& x) { x.clock = -1; })});
  {
    zmq::multipart_t f = encode_ps_message(h, v.data());
    f.addmem(v.data(), 3);  // a third frame on a push
    cases.push_back({"unexpected third frame", std::move(f)});
  }
  {
    PsHeader x = h;
    x.count = 3;
    zmq::multipart_t f;
    f.addmem(&x, sizeof x);
    f.addmem(v.data(), 16);
    cases.push_back({"payload of 16 bytes for 3 values", std::move(f)});
  }
  for (Case& c : cases) {
    std::string why;
    EXPECT_FALSE(decode_ps_message(std::move(c.frames), kTag, 8, &why)) << c.expect;
    EXPECT_NE(why.find(c.expect), std::string::npos)
        << "expected '" << c.expect << "', got '" << why << "'";
  }
  std::string why;
  auto ok = decode_ps_message(encode_ps_message(h, v.data()), kTag, 8, &why);
  ASSERT_TRUE(ok) << why;
  EXPECT_EQ(std::vector<float>(ok->payload, ok->payload + 4), v);
}

}  // namespace
}  // namespace brigade::ps_server_test
