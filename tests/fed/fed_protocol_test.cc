// The federated coordinator's pieces on their own: the aggregation and server optimizers
// against naive formulas, the message codec and the checks that refuse malformed or misplaced
// updates, and the state file's checksum.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/fed/fed_aggregate.h"
#include "brigade/fed/fed_message.h"
#include "brigade/fed/local_training.h"
#include "brigade/fed/state_file.h"
#include "brigade/fed/update_check.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

TEST(FedAggregate, WeightedMeanAndControlStepMatchTheirDefinitions) {
  const std::vector<float> a = {1, 2, -3}, b = {4, -1, 0}, ca = {0.5f, 0, 1}, cb = {1, 1, 1};
  const std::vector<ClientUpdate> updates = {
      {.client = 0, .samples = 10, .delta = a.data(), .control_delta = ca.data()},
      {.client = 3, .samples = 30, .delta = b.data(), .control_delta = cb.data()}};
  std::vector<float> mean(3);
  weighted_mean_update(updates, 3, mean.data());
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(mean[i], (10 * a[i] + 30 * b[i]) / 40);
  std::vector<float> c = {1, 1, 1};
  apply_control_deltas(updates, 3, 4, c.data());  // 4 clients in the federation, 2 answered
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(c[i], 1 + (ca[i] + cb[i]) / 4);
}

// Three steps of each server optimizer against the formulas written out.
TEST(FedAggregate, ServerOptimizersFollowReddiEtAl) {
  const std::vector<std::vector<float>> deltas = {{0.5f, -1}, {0.25f, 2}, {-1, 0.1f}};
  for (const std::string name : {"avg", "avgm", "adam", "yogi"}) {
    ServerOptimizerConfig cfg{
        .name = name, .lr = 0.5f, .momentum = 0.8f, .beta1 = 0.9f, .beta2 = 0.99f, .tau = 1e-3f};
    ServerOptimizer opt(cfg, 2);
    std::vector<float> x = {1, 2};
    std::vector<double> rx = {1, 2}, m = {0, 0}, v = {0, 0};
    for (const auto& d : deltas) {
      opt.apply(x.data(), d.data());
      for (int i = 0; i < 2; ++i) {
        if (name == "avg") {
          rx[i] += 0.5 * d[i];
        } else if (name == "avgm") {
          m[i] = 0.8 * m[i] + d[i];
          rx[i] += 0.5 * m[i];
        } else {
          m[i] = 0.9 * m[i] + 0.1 * d[i];
          const double d2 = static_cast<double>(d[i]) * d[i];
          v[i] = name == "adam" ? 0.99 * v[i] + 0.01 * d2
                                : v[i] - 0.01 * d2 * ((v[i] - d2 > 0) - (v[i] - d2 < 0));
          rx[i] += 0.5 * m[i] / (std::sqrt(v[i]) + 1e-3);
        }
      }
    }
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(x[i], rx[i], 1e-5) << name << " " << i;
    EXPECT_EQ(opt.state().size(), name == "avg" ? 0u : name == "avgm" ? 1u : 2u) << name;
  }
}

FedHeader update_header(int client, int64_t round, int64_t values) {
  FedHeader h;
  h.type = static_cast<uint32_t>(FedType::kUpdate);
  h.client = static_cast<uint32_t>(client);
  h.run_tag = 42;
  h.round = round;
  h.count = values;
  h.samples = 32;
  h.steps = 1;
  return h;
}

std::optional<FedMessage> roundtrip(const FedHeader& h, const std::vector<float>& model,
                                    std::string* why) {
  return decode_fed_message(encode_fed_message(h, model.data(), nullptr), 42, 1000, why);
}

TEST(FedMessages, MalformedMessagesAreRefusedWithAReason) {
  const std::vector<float> model(8, 0.5f);
  std::string why;
  ASSERT_TRUE(roundtrip(update_header(1, 0, 8), model, &why)) << why;

  FedHeader other_run = update_header(1, 0, 8);
  other_run.run_tag = 7;
  EXPECT_FALSE(roundtrip(other_run, model, &why));
  EXPECT_NE(why.find("another run"), std::string::npos) << why;

  FedHeader bad_magic = update_header(1, 0, 8);
  bad_magic.magic = 0;
  EXPECT_FALSE(roundtrip(bad_magic, model, &why));

  // A header that claims more values than its frame holds.
  zmq::multipart_t frames = encode_fed_message(update_header(1, 0, 8), model.data(), nullptr);
  FedHeader lie = update_header(1, 0, 9);
  frames[0].rebuild(&lie, sizeof lie);
  EXPECT_FALSE(decode_fed_message(std::move(frames), 42, 1000, &why));
  EXPECT_NE(why.find("bytes for 9 values"), std::string::npos) << why;

  // More values than the receiver accepts, a truncated header, too many frames.
  EXPECT_FALSE(decode_fed_message(encode_fed_message(update_header(1, 0, 8), model.data(), nullptr),
                                  42, 4, &why));
  zmq::multipart_t short_head;
  short_head.addmem("abc", 3);
  EXPECT_FALSE(decode_fed_message(std::move(short_head), 42, 1000, &why));
  zmq::multipart_t four;
  for (int i = 0; i < 4; ++i) four.addmem("x", 1);
  EXPECT_FALSE(decode_fed_message(std::move(four), 42, 1000, &why));
}

TEST(FedMessages, UpdatesThatDoNotBelongToTheRoundAreRefused) {
  RoundInProgress round;
  round.round = 3;
  round.attempt = 1;
  round.values = 8;
  round.asked = {0, 1};
  auto check = [&](FedHeader h, std::vector<float> model, int peer) {
    std::string why;
    h.attempt = h.attempt == 0 ? 1 : h.attempt;
    std::optional<FedMessage> m = roundtrip(h, model, &why);
    EXPECT_TRUE(m) << why;
    return update_refusal(*m, peer, round);
  };
  const std::vector<float> good(8, 0.25f);
  EXPECT_EQ(check(update_header(1, 3, 8), good, 1), "");
  EXPECT_NE(check(update_header(1, 2, 8), good, 1).find("answers round 3"),
            std::string::npos);  // 1-based
  EXPECT_NE(check(update_header(1, 3, 8), good, 0).find("claims to be client 1"),
            std::string::npos);
  EXPECT_NE(check(update_header(2, 3, 8), good, 2).find("not asked"), std::string::npos);
  EXPECT_NE(check(update_header(1, 3, 7), std::vector<float>(7, 0.f), 1).find("7 values"),
            std::string::npos);
  std::vector<float> nan = good;
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  nan[5] = std::numeric_limits<float>::infinity();
  EXPECT_NE(check(update_header(1, 3, 8), nan, 1).find("2 non-finite"), std::string::npos);
  FedHeader heavy = update_header(1, 3, 8);
  heavy.samples = kMaxClientSamples + 1;
  EXPECT_NE(check(heavy, good, 1).find("examples"), std::string::npos);
  round.answered = {1};
  EXPECT_NE(check(update_header(1, 3, 8), good, 1).find("already answered"), std::string::npos);
}

TEST(FedState, RoundTripsAndRefusesACorruptFile) {
  testing::TempDir dir;
  StateFile state;
  state.ints["next_round"] = 5;
  state.tensors["params"] = {1, 2, 3};
  state.tensors["control"] = {-1, 0.5f, 0};
  write_state_file(dir / "s", state);
  const StateFile back = read_state_file(dir / "s");
  EXPECT_EQ(back.ints, state.ints);
  EXPECT_EQ(back.tensors, state.tensors);
  EXPECT_THROW_WITH(back.tensor("params", 4, "s"), CheckpointError, "holds 3 values");
  testing::flip_bit(dir / "s", 30);
  EXPECT_THROW_WITH(read_state_file(dir / "s"), CheckpointError, "checksum");
}

TEST(FedLocal, SeededPermutationsArePermutationsAndDependOnTheSeed) {
  std::vector<int64_t> a, b;
  seeded_permutation(mix_seed(1, 2, 3), a, 100);
  seeded_permutation(mix_seed(1, 2, 4), b, 100);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_NE(a, b);
  std::vector<int64_t> again;
  seeded_permutation(mix_seed(1, 2, 3), again, 100);
  EXPECT_EQ(a, again);
}

}  // namespace
}  // namespace brigade
