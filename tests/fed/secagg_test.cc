// Secure aggregation (Bonawitz et al. 2017; src/brigade/fed/secagg/protocol.h) on its own: Shamir
// sharing against its definition, the fixed-point code at its bounds, whole rounds of clients
// and server (every message through the wire codec) against the plain fixed-point sum with
// clients dropping out at each step, what a single masked input tells the server (a uniformity
// test that is shown to fail on an unmasked input), and every refusal: tampered or misbound
// shares, malformed rosters and lists, misplaced messages, and garbage given to every decoder.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sodium.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <set>
#include <vector>

#include "brigade/fed/secagg/fixed_point.h"
#include "brigade/fed/secagg/masking.h"
#include "brigade/fed/secagg/protocol.h"
#include "brigade/fed/secagg/sealed_share.h"
#include "brigade/fed/secagg/secagg_client.h"
#include "brigade/fed/secagg/secagg_server.h"
#include "brigade/fed/secagg/shamir.h"
#include "brigade/fed/secagg/wire.h"

namespace brigade::secagg {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

RoundParams make_params(int clients, int threshold, int64_t length) {
  RoundParams p;
  p.id = {.run_tag = 0x5eca66, .round = 3, .attempt = 0};
  p.threshold = threshold;
  p.length = length;
  p.fixed = {.clip = 1.0f, .max_clients = clients};
  return p;
}

std::vector<std::vector<float>> random_updates(int clients, int64_t length, uint32_t seed) {
  std::mt19937 rng(seed);
  // Some values past the clip bound of 1, so clipping is part of every round.
  std::uniform_real_distribution<float> value(-1.2f, 1.2f);
  std::vector<std::vector<float>> updates(clients, std::vector<float>(length));
  for (auto& u : updates) {
    for (float& v : u) v = value(rng);
  }
  return updates;
}

std::vector<uint32_t> quantized(const std::vector<float>& x, const FixedPoint& fixed) {
  std::vector<uint32_t> q(x.size());
  std::string why;
  EXPECT_TRUE(quantize(x.data(), static_cast<int64_t>(x.size()), fixed, q.data(), &why)) << why;
  return q;
}

// Who leaves the round, and when.
struct Dropouts {
  std::set<uint32_t> before_sharing;  // advertised; their share bundle never arrives
  std::set<uint32_t> before_masking;  // shared; their masked input never arrives
  std::set<uint32_t> before_unmask;   // their masked input arrived; their reveal never does
};

// What a round ended in, and what it should have summed.
struct Outcome {
  std::optional<SecAggSum> sum;
  std::string error;  // the refusal that ended the round
  std::vector<uint32_t> expected_clients;
  std::vector<uint32_t> expected_fixed;  // the plain sum of their quantised updates
  std::vector<MaskedInput> seen;         // the masked inputs as the server decoded them
  double mask_seconds = 0;               // mean of the clients' mask_update
  double finish_seconds = 0;             // the server's finish
};

// One round over the wire codec: every message is encoded by its sender and decoded by its
// receiver, as the coordinator and the clients will.
Outcome run_round(const RoundParams& params, const std::vector<uint32_t>& ids,
                  const std::vector<std::vector<float>>& updates, const Dropouts& drop = {}) {
  Outcome out;
  std::string why;
  const RoundId& id = params.id;
  auto server = SecAggServer::create(params, &why);
  EXPECT_TRUE(server) << why;
  std::map<uint32_t, std::unique_ptr<SecAggClient>> clients;
  for (const uint32_t c : ids) {
    clients[c] = SecAggClient::create(params, c, &why);
    EXPECT_TRUE(clients[c]) << why;
    auto advert = decode_advert(encode_advert(clients[c]->advert(), id), id, &why);
    EXPECT_TRUE(advert && server->receive_advert(*advert, &why)) << why;
  }
  auto fail = [&](const std::string& step) {
    out.error = step + ": " + why;
    return out;
  };

  auto roster = server->close_advertising(&why);
  if (!roster) return fail("close_advertising");
  const Bytes roster_bytes = encode_roster(*roster, id);
  for (auto& [c, client] : clients) {
    auto got = decode_roster(roster_bytes, id, &why);
    EXPECT_TRUE(got) << why;
    auto bundle = client->share_keys(*got, &why);
    EXPECT_TRUE(bundle) << why;
    if (drop.before_sharing.count(c)) continue;
    auto decoded = decode_share_bundle(encode_share_bundle(*bundle, id), id, &why);
    EXPECT_TRUE(decoded && server->receive_shares(*decoded, &why)) << why;
  }

  auto inboxes = server->close_sharing(&why);
  if (!inboxes) return fail("close_sharing");
  double mask_total = 0;
  int masked = 0;
  for (const ShareInbox& inbox : *inboxes) {
    const uint32_t c = inbox.recipient;
    if (drop.before_masking.count(c)) continue;
    auto got = decode_share_inbox(encode_share_inbox(inbox, id), id, &why);
    EXPECT_TRUE(got) << why;
    const size_t index = std::find(ids.begin(), ids.end(), c) - ids.begin();
    const auto start = Clock::now();
    auto input = clients[c]->mask_update(*got, updates[index].data(), params.length, &why);
    mask_total += seconds_since(start);
    ++masked;
    EXPECT_TRUE(input) << why;
    auto decoded = decode_masked_input(encode_masked_input(*input, id), id, params.length, &why);
    EXPECT_TRUE(decoded && server->receive_masked_input(*decoded, &why)) << why;
    out.seen.push_back(*decoded);
    out.expected_clients.push_back(c);
  }
  out.mask_seconds = masked ? mask_total / masked : 0;
  out.expected_fixed.assign(params.length, 0);
  for (const uint32_t c : out.expected_clients) {
    const size_t index = std::find(ids.begin(), ids.end(), c) - ids.begin();
    const auto q = quantized(updates[index], params.fixed);
    for (int64_t i = 0; i < params.length; ++i) out.expected_fixed[i] += q[i];
  }

  auto request = server->close_masking(&why);
  if (!request) return fail("close_masking");
  const Bytes request_bytes = encode_unmask_request(*request, id);
  for (const uint32_t c : request->survivors) {
    if (drop.before_unmask.count(c)) continue;
    auto got = decode_unmask_request(request_bytes, id, &why);
    EXPECT_TRUE(got) << why;
    auto reply = clients[c]->unmask(*got, &why);
    EXPECT_TRUE(reply) << why;
    auto decoded = decode_unmask_reply(encode_unmask_reply(*reply, id), id, &why);
    EXPECT_TRUE(decoded && server->receive_unmask_reply(*decoded, &why)) << why;
  }
  const auto start = Clock::now();
  out.sum = server->finish(&why);
  out.finish_seconds = seconds_since(start);
  if (!out.sum) return fail("finish");
  return out;
}

std::vector<uint32_t> client_ids(int n) {
  std::vector<uint32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<uint32_t>(7 + 3 * i));  // not 0..n-1
  return ids;
}

void expect_exact_sum(const Outcome& out, const FixedPoint& fixed) {
  ASSERT_TRUE(out.sum) << out.error;
  EXPECT_EQ(out.sum->clients, out.expected_clients);
  ASSERT_EQ(out.sum->fixed.size(), out.expected_fixed.size());
  EXPECT_TRUE(out.sum->fixed == out.expected_fixed)
      << "the unmasked sum differs from the plain one";
  for (size_t i = 0; i < out.expected_fixed.size(); ++i) {
    EXPECT_FLOAT_EQ(out.sum->values[i],
                    static_cast<float>(fixed_to_real(out.expected_fixed[i], fixed)));
  }
}

// ---------------------------------------------------------------------------------- Shamir ----

std::vector<uint8_t> random_bytes(size_t n) {
  std::vector<uint8_t> b(n);
  randombytes_buf(b.data(), n);
  return b;
}

// Combines the shares whose rows are listed in `rows`.
std::vector<uint8_t> combine_rows(const std::vector<uint8_t>& numbers,
                                  const std::vector<uint8_t>& shares, const std::vector<int>& rows,
                                  size_t size, int threshold, std::string* why) {
  std::vector<uint8_t> xs, ys;
  for (const int r : rows) {
    xs.push_back(numbers[r]);
    ys.insert(ys.end(), shares.begin() + r * size, shares.begin() + (r + 1) * size);
  }
  std::vector<uint8_t> secret(size);
  if (!shamir_combine(xs, ys, threshold, secret, why)) return {};
  return secret;
}

// Calls f with every subset of k of the n rows.
void for_each_subset(int n, int k, const std::function<void(const std::vector<int>&)>& f) {
  std::vector<int> rows(k);
  std::function<void(int, int)> pick = [&](int from, int depth) {
    if (depth == k) return f(rows);
    for (int r = from; r < n; ++r) {
      rows[depth] = r;
      pick(r + 1, depth + 1);
    }
  };
  pick(0, 0);
}

TEST(SecAggShamir, AnyThresholdOfSharesRecoversTheSecretAndFewerDoNot) {
  const int n = 10, t = 6;
  const size_t size = 32;
  const auto secret = random_bytes(size);
  const std::vector<uint8_t> numbers = {3, 9, 17, 42, 100, 128, 200, 201, 254, 255};
  std::vector<uint8_t> shares(n * size);
  std::string why;
  ASSERT_TRUE(shamir_split(secret, t, numbers, shares, &why)) << why;
  int subsets = 0;
  for (int k = t; k <= n; ++k) {
    for_each_subset(n, k, [&](const std::vector<int>& rows) {
      EXPECT_EQ(combine_rows(numbers, shares, rows, size, t, &why), secret) << k << " shares";
      ++subsets;
    });
  }
  EXPECT_EQ(subsets, 210 + 120 + 45 + 10 + 1);
  // t - 1 shares interpolate a polynomial of lower degree: a different value at 0. The
  // threshold is passed as t - 1, as shamir_combine itself refuses fewer shares than told.
  for_each_subset(n, t - 1, [&](const std::vector<int>& rows) {
    const auto wrong = combine_rows(numbers, shares, rows, size, t - 1, &why);
    ASSERT_EQ(wrong.size(), size) << why;
    EXPECT_NE(wrong, secret);
  });
  std::vector<uint8_t> out(size);
  std::vector<uint8_t> five(numbers.begin(), numbers.begin() + 5);
  EXPECT_FALSE(shamir_combine(five, {shares.data(), 5 * size}, t, out, &why));
  EXPECT_NE(why.find("5 shares for threshold 6"), std::string::npos) << why;
}

TEST(SecAggShamir, BadShareNumbersThresholdsAndSizesAreRefused) {
  const auto secret = random_bytes(32);
  std::vector<uint8_t> shares(4 * 32), out(32);
  std::string why;
  auto split = [&](std::vector<uint8_t> numbers, int t) {
    shares.assign(numbers.size() * 32, 0);
    return shamir_split(secret, t, numbers, shares, &why);
  };
  EXPECT_FALSE(split({1, 2, 0, 4}, 3));
  EXPECT_NE(why.find("share number 0"), std::string::npos) << why;
  EXPECT_FALSE(split({1, 2, 2, 4}, 3));
  EXPECT_NE(why.find("share number 2 given twice"), std::string::npos) << why;
  EXPECT_FALSE(split({1, 2, 3, 4}, 1));
  EXPECT_NE(why.find("threshold 1"), std::string::npos) << why;
  EXPECT_FALSE(split({1, 2, 3, 4}, 5));
  std::vector<uint8_t> all(255);
  for (int i = 0; i < 255; ++i) all[i] = static_cast<uint8_t>(i + 1);
  EXPECT_TRUE(split(all, 255)) << why;
  all.push_back(7);
  EXPECT_FALSE(split(all, 2));
  EXPECT_NE(why.find("at most 255"), std::string::npos) << why;
  ASSERT_TRUE(split({1, 2, 3, 4}, 3)) << why;
  std::vector<uint8_t> short_shares(4 * 32 - 1);
  EXPECT_FALSE(shamir_split(secret, 3, std::vector<uint8_t>{1, 2, 3, 4}, short_shares, &why));
  const std::vector<uint8_t> dup = {1, 1, 3};
  EXPECT_FALSE(shamir_combine(dup, {shares.data(), 3 * 32}, 3, out, &why));
  const std::vector<uint8_t> zero = {0, 2, 3};
  EXPECT_FALSE(shamir_combine(zero, {shares.data(), 3 * 32}, 3, out, &why));
  const std::vector<uint8_t> good = {1, 2, 3};
  EXPECT_TRUE(shamir_combine(good, {shares.data(), 3 * 32}, 3, out, &why)) << why;
  EXPECT_EQ(out, secret);
}

// ------------------------------------------------------------------------------ fixed point ----

TEST(SecAggFixedPoint, RoundTripIsWithinHalfAStepAndClipsPastTheBound) {
  const FixedPoint fixed{.clip = 2.5f, .max_clients = 10};
  EXPECT_EQ(fixed.max_magnitude(), 214748364);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> value(-2.5f, 2.5f);
  std::vector<float> x(10000);
  for (float& v : x) v = value(rng);
  x[0] = 2.5f, x[1] = -2.5f, x[2] = 0, x[3] = 1e-12f;
  const auto q = quantized(x, fixed);
  const double half_step = 0.5 / fixed.scale();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::abs(fixed_to_real(q[i], fixed) - x[i]), half_step * (1 + 1e-9)) << x[i];
  }
  const std::vector<float> past = {3.0f, -1e30f, 2.5f};
  std::vector<uint32_t> qp(3);
  std::string why;
  EXPECT_EQ(quantize(past.data(), 3, fixed, qp.data(), &why), 2);
  EXPECT_EQ(static_cast<int32_t>(qp[0]), fixed.max_magnitude());
  EXPECT_EQ(static_cast<int32_t>(qp[1]), -fixed.max_magnitude());
  EXPECT_EQ(qp[2], qp[0]);
}

TEST(SecAggFixedPoint, SumsOfMaxClientsValuesAtTheBoundDoNotWrap) {
  for (const int64_t clients : {1, 2, 3, 10, 50, 255}) {
    const FixedPoint fixed{.clip = 1.0f, .max_clients = clients};
    // The scale is the largest for which max_clients values at the bound fit an int32.
    EXPECT_LE(clients * fixed.max_magnitude(), INT32_MAX);
    EXPECT_GT(clients * (fixed.max_magnitude() + 1), INT32_MAX);
    for (const float bound : {1.0f, -1.0f, 7.0f, -7.0f}) {
      const auto q = quantized({bound}, fixed);
      uint32_t sum = 0;
      for (int64_t c = 0; c < clients; ++c) sum += q[0];
      EXPECT_NEAR(fixed_to_real(sum, fixed), clients * std::clamp(bound, -1.0f, 1.0f), 1e-6)
          << clients << " clients at " << bound;
    }
  }
}

TEST(SecAggFixedPoint, NonFiniteValuesAndBadConfigsAreRefused) {
  const FixedPoint fixed{.clip = 1.0f, .max_clients = 4};
  std::string why;
  std::vector<uint32_t> q(3);
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    const std::vector<float> x = {0.5f, bad, 0};
    EXPECT_FALSE(quantize(x.data(), 3, fixed, q.data(), &why));
    EXPECT_NE(why.find("value 1"), std::string::npos) << why;
  }
  EXPECT_FALSE(validate_fixed_point({.clip = 0, .max_clients = 4}, &why));
  EXPECT_FALSE(validate_fixed_point({.clip = NAN, .max_clients = 4}, &why));
  EXPECT_FALSE(validate_fixed_point({.clip = 1, .max_clients = 0}, &why));
  EXPECT_NE(why.find("max_clients = 0"), std::string::npos) << why;
  RoundParams p = make_params(10, 6, 100);
  EXPECT_TRUE(validate_round_params(p, &why)) << why;
  p.threshold = 1;
  EXPECT_FALSE(validate_round_params(p, &why));
  p.threshold = 11;  // more than max_clients
  EXPECT_FALSE(validate_round_params(p, &why));
  p = make_params(10, 6, 0);
  EXPECT_FALSE(validate_round_params(p, &why));
  EXPECT_FALSE(SecAggClient::create(p, 1, &why));
  EXPECT_FALSE(SecAggServer::create(p, &why));
}

// --------------------------------------------------------------------------------- masking ----

TEST(SecAggMasking, PairwiseSeedsAgreeAndAreBoundToTheRound) {
  SecretKey a_sk, b_sk;
  PublicKey a_pk, b_pk;
  crypto_kx_keypair(a_pk.data(), a_sk.data());
  crypto_kx_keypair(b_pk.data(), b_sk.data());
  const RoundId id{.run_tag = 1, .round = 2, .attempt = 0};
  Seed ab, ba, other_round;
  std::string why;
  ASSERT_TRUE(pairwise_seed(a_sk, a_pk, 4, b_pk, 9, id, &ab, &why)) << why;
  ASSERT_TRUE(pairwise_seed(b_sk, b_pk, 9, a_pk, 4, id, &ba, &why)) << why;
  EXPECT_EQ(0, sodium_memcmp(ab.data(), ba.data(), 32));
  ASSERT_TRUE(pairwise_seed(a_sk, a_pk, 4, b_pk, 9, {.run_tag = 1, .round = 2, .attempt = 1},
                            &other_round, &why));
  EXPECT_NE(0, sodium_memcmp(ab.data(), other_round.data(), 32));
  const PublicKey zero{};  // the identity point: small order
  EXPECT_FALSE(pairwise_seed(a_sk, a_pk, 4, zero, 9, id, &ab, &why));
  EXPECT_FALSE(usable_public_key(zero));
  EXPECT_TRUE(usable_public_key(a_pk));
  // The PRG is deterministic in its seed, and a mask added then subtracted leaves nothing.
  std::vector<uint32_t> m1(1000), m2(1000), acc(1000, 77), scratch;
  expand_mask(ab, m1.data(), 1000);
  expand_mask(ba, m2.data(), 1000);
  EXPECT_EQ(m1, m2);
  apply_mask(ab, MaskSign::kAdd, acc.data(), 1000, &scratch);
  EXPECT_NE(acc, std::vector<uint32_t>(1000, 77));
  apply_mask(ab, MaskSign::kSubtract, acc.data(), 1000, &scratch);
  EXPECT_EQ(acc, std::vector<uint32_t>(1000, 77));
}

// ---------------------------------------------------------------------------------- rounds ----

TEST(SecAggRound, TheSumIsExactWith0_1_AndNMinusTDropoutsAfterMasking) {
  const int n = 10, t = 6;
  const auto params = make_params(n, t, 1000);
  const auto ids = client_ids(n);
  const auto updates = random_updates(n, params.length, 11);
  for (const int drops : {0, 1, n - t}) {
    // Their masked inputs are lost: they are in U2 \ U3.
    Dropouts lost;
    for (int i = 0; i < drops; ++i) lost.before_masking.insert(ids[2 * i]);
    SCOPED_TRACE(::testing::Message() << drops << " masked inputs lost");
    expect_exact_sum(run_round(params, ids, updates, lost), params.fixed);
    // Their masked inputs arrive but their reveals do not: still t replies.
    Dropouts silent;
    for (int i = 0; i < drops; ++i) silent.before_unmask.insert(ids[i + 3]);
    SCOPED_TRACE(::testing::Message() << drops << " survivors silent at unmasking");
    const Outcome out = run_round(params, ids, updates, silent);
    expect_exact_sum(out, params.fixed);
    ASSERT_TRUE(out.sum);
    EXPECT_EQ(out.sum->clients.size(), static_cast<size_t>(n));
  }
}

TEST(SecAggRound, DropoutsBeforeSharingAndBeforeMaskingAreBothHandled) {
  const int n = 10, t = 6;
  const auto params = make_params(n, t, 1000);
  const auto ids = client_ids(n);
  const auto updates = random_updates(n, params.length, 12);
  // Two never send their shares (U1 \ U2: nobody masks with them), two more shared and then
  // left before masking (U2 \ U3: their pairwise masks are rebuilt), and with U3 = 6 = t one
  // more survivor could not be spared at unmasking.
  Dropouts drop;
  drop.before_sharing = {ids[0], ids[5]};
  drop.before_masking = {ids[3], ids[9]};
  const Outcome out = run_round(params, ids, updates, drop);
  expect_exact_sum(out, params.fixed);
  ASSERT_TRUE(out.sum);
  EXPECT_EQ(out.sum->clients,
            (std::vector<uint32_t>{ids[1], ids[2], ids[4], ids[6], ids[7], ids[8]}));
  // The dequantised sum is the sum of the clipped updates to within the quantisation.
  for (int64_t i = 0; i < params.length; ++i) {
    double plain = 0;
    for (const int c : {1, 2, 4, 6, 7, 8}) plain += std::clamp(updates[c][i], -1.0f, 1.0f);
    EXPECT_NEAR(out.sum->values[i], plain, 1e-5);
  }
}

TEST(SecAggRound, MoreThanNMinusTDropoutsRefuseTheRound) {
  const int n = 10, t = 6;
  const auto params = make_params(n, t, 200);
  const auto ids = client_ids(n);
  const auto updates = random_updates(n, params.length, 13);
  const std::set<uint32_t> five = {ids[0], ids[2], ids[4], ids[6], ids[8]};
  Dropouts drop;
  drop.before_sharing = five;
  Outcome out = run_round(params, ids, updates, drop);
  EXPECT_FALSE(out.sum);
  EXPECT_NE(out.error.find("close_sharing: 5 clients sent their shares (threshold 6)"),
            std::string::npos)
      << out.error;
  drop = {};
  drop.before_masking = five;
  out = run_round(params, ids, updates, drop);
  EXPECT_FALSE(out.sum);
  EXPECT_NE(out.error.find("close_masking: 5 masked inputs arrived (threshold 6)"),
            std::string::npos)
      << out.error;
  drop = {};
  drop.before_unmask = five;
  out = run_round(params, ids, updates, drop);
  EXPECT_FALSE(out.sum);
  EXPECT_NE(out.error.find("finish: 5 of 10 survivors revealed their shares (threshold 6)"),
            std::string::npos)
      << out.error;
  drop = {};
  drop.before_masking = {ids[0], ids[1]};
  drop.before_unmask = {ids[2], ids[3], ids[4]};
  out = run_round(params, ids, updates, drop);
  EXPECT_FALSE(out.sum);
  EXPECT_NE(out.error.find("5 of 8 survivors"), std::string::npos) << out.error;
}

// A round driven by hand up to the unmask requests, for the tests that tamper with step 4.
struct Unmasking {
  RoundParams params = make_params(5, 3, 64);
  std::vector<uint32_t> ids = client_ids(5);
  std::unique_ptr<SecAggServer> server;
  std::vector<std::unique_ptr<SecAggClient>> clients;
  UnmaskRequest request;

  explicit Unmasking(const std::set<uint32_t>& lost = {}) {
    std::string why;
    server = SecAggServer::create(params, &why);
    for (const uint32_t c : ids) {
      clients.push_back(SecAggClient::create(params, c, &why));
      EXPECT_TRUE(server->receive_advert(clients.back()->advert(), &why)) << why;
    }
    const auto roster = server->close_advertising(&why);
    for (auto& c : clients)
      EXPECT_TRUE(server->receive_shares(*c->share_keys(*roster, &why), &why));
    const auto inboxes = server->close_sharing(&why);
    const std::vector<float> x(params.length, 0.25f);
    for (size_t i = 0; i < clients.size(); ++i) {
      if (lost.count(ids[i])) continue;
      auto input = clients[i]->mask_update((*inboxes)[i], x.data(), params.length, &why);
      EXPECT_TRUE(input && server->receive_masked_input(*input, &why)) << why;
    }
    request = *server->close_masking(&why);
  }
};

TEST(SecAggRound, ACorruptedRevealFailsTheRoundInsteadOfGivingAWrongSum) {
  for (const bool key_share : {false, true}) {
    Unmasking round(key_share ? std::set<uint32_t>{client_ids(5)[4]} : std::set<uint32_t>{});
    std::string why;
    for (size_t i = 0; i < round.request.survivors.size(); ++i) {
      auto reply = round.clients[i]->unmask(round.request, &why);
      ASSERT_TRUE(reply) << why;
      if (i == 1) {
        auto& list = key_share ? reply->key_shares : reply->seed_shares;
        list[0].share[5] ^= 0x10;
      }
      ASSERT_TRUE(round.server->receive_unmask_reply(*reply, &why)) << why;
    }
    EXPECT_FALSE(round.server->finish(&why));
    EXPECT_NE(why.find(key_share ? "do not rebuild it" : "do not match its commitment"),
              std::string::npos)
        << why;
  }
}

TEST(SecAggRound, AClientAskedForBothSecretsOfOneClientRefuses) {
  Unmasking round({client_ids(5)[4]});
  std::string why;
  UnmaskRequest both = round.request;  // survivors 0..3, dropped 4
  both.dropped = {round.ids[1], round.ids[4]};
  EXPECT_FALSE(round.clients[0]->unmask(both, &why));
  EXPECT_NE(why.find("both survivor and dropped"), std::string::npos) << why;
  // The refusal changed nothing: the honest request is answered, once.
  EXPECT_TRUE(round.clients[0]->unmask(round.request, &why)) << why;
  UnmaskRequest flipped{.survivors = {round.ids[0], round.ids[2], round.ids[3]},
                        .dropped = {round.ids[1], round.ids[4]}};
  EXPECT_FALSE(round.clients[0]->unmask(flipped, &why));
  EXPECT_NE(why.find("answered the round's unmask request already"), std::string::npos) << why;
  // Requests that do not split the client's U2 exactly, or leave too few survivors.
  const std::vector<UnmaskRequest> bad = {
      {.survivors = {round.ids[0], round.ids[1], round.ids[2]}, .dropped = {round.ids[4]}},
      {.survivors = {round.ids[0], round.ids[1], round.ids[2], round.ids[3], 999},
       .dropped = {round.ids[4]}},
      {.survivors = {round.ids[1], round.ids[0], round.ids[2], round.ids[3]},
       .dropped = {round.ids[4]}},
      {.survivors = {round.ids[1], round.ids[2]},
       .dropped = {round.ids[0], round.ids[3], round.ids[4]}},
      {.survivors = {round.ids[0], round.ids[1], round.ids[2], round.ids[3]}, .dropped = {}},
  };
  for (const UnmaskRequest& r : bad) {
    EXPECT_FALSE(round.clients[1]->unmask(r, &why));
    EXPECT_FALSE(why.empty());
  }
  EXPECT_TRUE(round.clients[1]->unmask(round.request, &why)) << why;
}

// ------------------------------------------------------------------ what the server sees ----

double byte_chi_square(const std::vector<uint32_t>& v, int position) {
  std::vector<double> count(256, 0);
  for (const uint32_t x : v) count[(x >> (8 * position)) & 0xff] += 1;
  const double expected = v.size() / 256.0;
  double chi2 = 0;
  for (const double c : count) chi2 += (c - expected) * (c - expected) / expected;
  return chi2;
}

double correlation(const std::vector<float>& x, const std::vector<uint32_t>& y) {
  const size_t n = x.size();
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += static_cast<int32_t>(y[i]);
  mx /= n, my /= n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dx = x[i] - mx, dy = static_cast<int32_t>(y[i]) - my;
    sxy += dx * dy, sxx += dx * dx, syy += dy * dy;
  }
  return sxy / std::sqrt(sxx * syy);
}

// Whether y looks like uniform noise independent of x: each of its four byte positions passes a
// chi-square test for uniformity at p = 1e-6 (255 degrees of freedom: 377, by Wilson-Hilferty),
// and y (read as int32) is uncorrelated with x (|r| < 0.1, six standard errors for 4096 values).
bool looks_independent(const std::vector<float>& x, const std::vector<uint32_t>& y,
                       std::string* report) {
  bool uniform = true;
  *report = "chi2 per byte:";
  for (int p = 0; p < 4; ++p) {
    const double chi2 = byte_chi_square(y, p);
    uniform = uniform && chi2 < 377;
    *report += fmt::format(" {:.1f}", chi2);
  }
  const double r = correlation(x, y);
  *report += fmt::format(", correlation {:.4f}", r);
  return uniform && std::abs(r) < 0.1;
}

TEST(SecAggPrivacy, AMaskedInputLooksUniformAndIndependentOfItsUpdate) {
  const int64_t length = 4096;
  const auto params = make_params(3, 2, length);
  const auto ids = client_ids(3);
  // Two very different updates for client ids[0]: a ramp over the whole clip range and a
  // sparse spike train; the others send noise.
  std::vector<std::vector<float>> ramp = random_updates(3, length, 14), spikes = ramp;
  for (int64_t i = 0; i < length; ++i) {
    ramp[0][i] = -1.0f + 2.0f * i / length;
    spikes[0][i] = i % 64 == 0 ? 0.9f : 0.0f;
  }
  for (const auto* updates : {&ramp, &spikes}) {
    const Outcome out = run_round(params, ids, *updates);
    ASSERT_TRUE(out.sum) << out.error;
    const auto it = std::find_if(out.seen.begin(), out.seen.end(),
                                 [&](const MaskedInput& m) { return m.client == ids[0]; });
    ASSERT_NE(it, out.seen.end());
    std::string report;
    EXPECT_TRUE(looks_independent((*updates)[0], it->masked, &report)) << report;
    std::printf("secagg %s, masked: %s\n", updates == &ramp ? "ramp" : "spikes", report.c_str());
    // The same test on what the server would see without masking fails.
    const auto raw = quantized((*updates)[0], params.fixed);
    EXPECT_FALSE(looks_independent((*updates)[0], raw, &report)) << report;
    std::printf("secagg %s, unmasked: %s\n", updates == &ramp ? "ramp" : "spikes", report.c_str());
    expect_exact_sum(out, params.fixed);
  }
}

// ---------------------------------------------------------------------------- sealed shares ----

TEST(SecAggSealedShare, TamperedReplayedAndRedirectedSharesAreRefused) {
  SecretKey u_sk, v_sk, w_sk;
  PublicKey u_pk, v_pk, w_pk;
  crypto_box_keypair(u_pk.data(), u_sk.data());
  crypto_box_keypair(v_pk.data(), v_sk.data());
  crypto_box_keypair(w_pk.data(), w_sk.data());
  const RoundId id{.run_tag = 0xabc, .round = 5, .attempt = 1};
  SharePair pair, opened;
  randombytes_buf(pair.key_share.data(), 32);
  randombytes_buf(pair.seed_share.data(), 32);
  SealedBytes u_to_v, v_to_u;
  std::string why;
  ASSERT_TRUE(seal_share(pair, 1, 2, id, u_sk, v_pk, &u_to_v, &why)) << why;
  ASSERT_TRUE(open_share(u_to_v, 1, 2, id, v_sk, u_pk, &opened, &why)) << why;
  EXPECT_EQ(0, sodium_memcmp(opened.key_share.data(), pair.key_share.data(), 32));
  EXPECT_EQ(0, sodium_memcmp(opened.seed_share.data(), pair.seed_share.data(), 32));
  for (const size_t at : {size_t{0}, size_t{30}, kSealedShareBytes - 1}) {
    SealedBytes tampered = u_to_v;
    tampered[at] ^= 1;
    EXPECT_FALSE(open_share(tampered, 1, 2, id, v_sk, u_pk, &opened, &why));
    EXPECT_NE(why.find("does not open"), std::string::npos) << why;
  }
  // Same keys, another round, attempt or run: opens, but the binding refuses it.
  for (const RoundId other : {RoundId{0xabc, 6, 1}, RoundId{0xabc, 5, 0}, RoundId{0xabd, 5, 1}}) {
    EXPECT_FALSE(open_share(u_to_v, 1, 2, other, v_sk, u_pk, &opened, &why));
    EXPECT_NE(why.find("is bound to run"), std::string::npos) << why;
  }
  // Redirected to w: does not open. Claimed to come from w: does not open.
  EXPECT_FALSE(open_share(u_to_v, 1, 3, id, w_sk, u_pk, &opened, &why));
  EXPECT_FALSE(open_share(u_to_v, 3, 2, id, v_sk, w_pk, &opened, &why));
  // v's own box to u handed back to v as if from u: the box key is the same both ways, so it
  // opens; the binding names v -> u and refuses it.
  ASSERT_TRUE(seal_share(pair, 2, 1, id, v_sk, u_pk, &v_to_u, &why)) << why;
  EXPECT_FALSE(open_share(v_to_u, 1, 2, id, v_sk, u_pk, &opened, &why));
  EXPECT_NE(why.find("client 2 -> 1"), std::string::npos) << why;
  // A recipient key of small order is refused when sealing.
  EXPECT_FALSE(seal_share(pair, 1, 2, id, u_sk, PublicKey{}, &u_to_v, &why));
}

// --------------------------------------------------------------------- client refusals ----

struct Sharing {
  RoundParams params = make_params(5, 3, 16);
  std::vector<uint32_t> ids = client_ids(5);
  std::vector<std::unique_ptr<SecAggClient>> clients;
  Roster roster;
  std::vector<ShareBundle> bundles;

  Sharing() {
    std::string why;
    for (const uint32_t c : ids) {
      clients.push_back(SecAggClient::create(params, c, &why));
      roster.clients.push_back(clients.back()->advert());
    }
  }
  void share() {
    std::string why;
    for (auto& c : clients) bundles.push_back(*c->share_keys(roster, &why));
  }
  // Client i's inbox as an honest server builds it.
  ShareInbox inbox(size_t i) const {
    ShareInbox box{.recipient = ids[i], .shares = {}};
    for (const ShareBundle& b : bundles) {
      for (const SealedShare& s : b.shares) {
        if (s.recipient == ids[i]) box.shares.push_back(s);
      }
    }
    return box;
  }
};

TEST(SecAggClient, MalformedRostersAreRefusedWithAReason) {
  Sharing s;
  std::string why;
  auto expect_refused = [&](Roster roster, const std::string& reason) {
    EXPECT_FALSE(s.clients[0]->share_keys(roster, &why)) << reason;
    EXPECT_NE(why.find(reason), std::string::npos) << why;
  };
  Roster r = s.roster;
  r.clients[3] = r.clients[2];
  expect_refused(r, "names client 13 twice");
  r = s.roster;
  std::swap(r.clients[1], r.clients[2]);
  expect_refused(r, "not sorted");
  r = s.roster;
  r.clients.push_back({.client = 1000, .c_pk = r.clients[1].c_pk, .s_pk = r.clients[1].s_pk});
  expect_refused(r, "a roster of 6 clients (threshold 3, at most 5)");
  r = s.roster;
  r.clients.resize(2);
  expect_refused(r, "a roster of 2 clients");
  r = s.roster;
  r.clients.erase(r.clients.begin());
  expect_refused(r, "lacks client 7");
  r = s.roster;
  r.clients[0].s_pk = r.clients[1].s_pk;
  expect_refused(r, "are not its own");
  r = s.roster;
  r.clients[3].s_pk = PublicKey{};
  expect_refused(r, "client 16: a mask-agreement key of small order");
  r = s.roster;
  r.clients[3].c_pk = PublicKey{};
  expect_refused(r, "client 16's encryption key is of small order");
  // Wrong sizes never reach the client: the decoder refuses them.
  Bytes bytes = encode_roster(s.roster, s.params.id);
  bytes.pop_back();
  EXPECT_FALSE(decode_roster(bytes, s.params.id, &why));
  EXPECT_NE(why.find("bytes left for 5 entries"), std::string::npos) << why;
  // After all the refusals the honest roster is still accepted, once.
  EXPECT_TRUE(s.clients[0]->share_keys(s.roster, &why)) << why;
  EXPECT_FALSE(s.clients[0]->share_keys(s.roster, &why));
}

TEST(SecAggClient, MalformedInboxesAreRefusedWithAReason) {
  Sharing s;
  s.share();
  std::string why;
  const std::vector<float> x(s.params.length, 0.5f);
  auto expect_refused = [&](const ShareInbox& inbox, const std::string& reason) {
    EXPECT_FALSE(s.clients[0]->mask_update(inbox, x.data(), s.params.length, &why)) << reason;
    EXPECT_NE(why.find(reason), std::string::npos) << why;
  };
  const ShareInbox good = s.inbox(0);
  ShareInbox bad = good;
  bad.recipient = s.ids[1];
  expect_refused(bad, "an inbox for client 10");
  bad = good;
  bad.shares[1] = bad.shares[0];
  expect_refused(bad, "two shares from client 10");
  bad = good;
  bad.shares[2].sender = 999;
  expect_refused(bad, "from client 999, not in the roster");
  bad = good;
  bad.shares.resize(1);
  expect_refused(bad, "an inbox of 1 shares");
  bad = good;
  bad.shares[3].box[60] ^= 4;
  expect_refused(bad, "does not open");
  bad = good;
  bad.shares[0] = s.inbox(2).shares[1];  // 10's share for 13, relabelled as for 7
  bad.shares[0].recipient = s.ids[0];
  expect_refused(bad, "does not open");
  bad = good;
  bad.shares[0].recipient = s.ids[3];
  expect_refused(bad, "a share for client 16 in client 7's inbox");
  std::vector<float> nan_update = x;
  nan_update[5] = NAN;
  EXPECT_FALSE(s.clients[0]->mask_update(good, nan_update.data(), s.params.length, &why));
  EXPECT_FALSE(s.clients[0]->mask_update(good, x.data(), s.params.length - 1, &why));
  EXPECT_TRUE(s.clients[0]->mask_update(good, x.data(), s.params.length, &why)) << why;
  EXPECT_FALSE(s.clients[0]->mask_update(good, x.data(), s.params.length, &why));
  EXPECT_NE(why.find("masked its input for the round already"), std::string::npos) << why;
}

// --------------------------------------------------------------------- server refusals ----

TEST(SecAggServer, MisplacedAndMalformedMessagesAreRefused) {
  Sharing s;
  std::string why;
  auto server = SecAggServer::create(s.params, &why);
  ASSERT_TRUE(server) << why;
  EXPECT_FALSE(server->close_advertising(&why));  // nobody yet
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(server->receive_advert(s.clients[i]->advert(), &why));
  EXPECT_FALSE(server->receive_advert(s.clients[0]->advert(), &why));
  EXPECT_NE(why.find("advertised keys twice"), std::string::npos) << why;
  EXPECT_FALSE(server->receive_advert({.client = 99, .c_pk = {}, .s_pk = {}}, &why));
  EXPECT_NE(why.find("the roster is full"), std::string::npos) << why;
  EXPECT_FALSE(server->receive_shares({}, &why));
  EXPECT_NE(why.find("share bundle while the round is advertising"), std::string::npos) << why;
  const auto roster = server->close_advertising(&why);
  ASSERT_TRUE(roster) << why;
  s.roster = *roster;
  s.share();
  ShareBundle bad = s.bundles[0];
  bad.sender = 99;
  EXPECT_FALSE(server->receive_shares(bad, &why));
  bad = s.bundles[0];
  bad.shares.pop_back();
  EXPECT_FALSE(server->receive_shares(bad, &why));
  EXPECT_NE(why.find("sent 3 shares for a roster of 5"), std::string::npos) << why;
  bad = s.bundles[0];
  bad.shares[1].recipient = bad.shares[0].recipient;
  EXPECT_FALSE(server->receive_shares(bad, &why));
  bad = s.bundles[0];
  bad.shares[1].sender = s.ids[2];
  EXPECT_FALSE(server->receive_shares(bad, &why));
  for (const auto& b : s.bundles) ASSERT_TRUE(server->receive_shares(b, &why)) << why;
  EXPECT_FALSE(server->receive_shares(s.bundles[1], &why));
  EXPECT_NE(why.find("sent its shares twice"), std::string::npos) << why;
  const auto inboxes = server->close_sharing(&why);
  ASSERT_TRUE(inboxes) << why;
  EXPECT_FALSE(server->receive_advert(s.clients[0]->advert(), &why));
  const std::vector<float> x(s.params.length, -0.5f);
  auto input = s.clients[0]->mask_update((*inboxes)[0], x.data(), s.params.length, &why);
  ASSERT_TRUE(input) << why;
  MaskedInput wrong = *input;
  wrong.masked.pop_back();
  EXPECT_FALSE(server->receive_masked_input(wrong, &why));
  wrong = *input;
  wrong.client = 99;
  EXPECT_FALSE(server->receive_masked_input(wrong, &why));
  ASSERT_TRUE(server->receive_masked_input(*input, &why)) << why;
  EXPECT_FALSE(server->receive_masked_input(*input, &why));
  for (int i = 1; i < 3; ++i) {
    auto in = s.clients[i]->mask_update((*inboxes)[i], x.data(), s.params.length, &why);
    ASSERT_TRUE(in && server->receive_masked_input(*in, &why)) << why;
  }
  const auto request = server->close_masking(&why);
  ASSERT_TRUE(request) << why;
  EXPECT_EQ(request->dropped, (std::vector<uint32_t>{s.ids[3], s.ids[4]}));
  auto reply = s.clients[0]->unmask(*request, &why);
  ASSERT_TRUE(reply) << why;
  UnmaskReply odd = *reply;
  std::swap(odd.seed_shares[0], odd.seed_shares[1]);
  EXPECT_FALSE(server->receive_unmask_reply(odd, &why));
  EXPECT_NE(why.find("does not follow the request"), std::string::npos) << why;
  odd = *reply;
  odd.key_shares.pop_back();
  EXPECT_FALSE(server->receive_unmask_reply(odd, &why));
  odd = *reply;
  odd.client = s.ids[3];  // dropped, not a survivor
  EXPECT_FALSE(server->receive_unmask_reply(odd, &why));
  ASSERT_TRUE(server->receive_unmask_reply(*reply, &why)) << why;
  EXPECT_FALSE(server->receive_unmask_reply(*reply, &why));
  EXPECT_FALSE(server->finish(&why));  // 1 reply, threshold 3: and finish may be tried again
  for (int i = 1; i < 3; ++i) {
    ASSERT_TRUE(server->receive_unmask_reply(*s.clients[i]->unmask(*request, &why), &why)) << why;
  }
  const auto sum = server->finish(&why);
  ASSERT_TRUE(sum) << why;
  for (const float v : sum->values) EXPECT_NEAR(v, -1.5f, 1e-6);
  EXPECT_FALSE(server->finish(&why));
}

// -------------------------------------------------------------------------------- the wire ----

// One valid encoding of every message type, each with its decoder.
struct Encoded {
  Bytes bytes;
  std::function<bool(std::span<const uint8_t>, std::string*)> decode;
};

std::vector<Encoded> every_message(const RoundId& id, int64_t length) {
  Sharing s;
  s.share();
  const MaskedInput input{.client = 7, .masked = std::vector<uint32_t>(length, 0xdeadbeef)};
  const UnmaskRequest request{.survivors = {7, 10, 13}, .dropped = {16, 19}};
  UnmaskReply reply{.client = 7, .seed_shares = {}, .key_shares = {}};
  for (const uint32_t c : request.survivors) reply.seed_shares.push_back({c, {}});
  for (const uint32_t c : request.dropped) reply.key_shares.push_back({c, {}});
  auto ok = [](const auto& decoded) { return decoded.has_value(); };
  return {
      {encode_advert(s.clients[0]->advert(), id),
       [=](auto b, auto w) { return ok(decode_advert(b, id, w)); }},
      {encode_roster(s.roster, id), [=](auto b, auto w) { return ok(decode_roster(b, id, w)); }},
      {encode_share_bundle(s.bundles[0], id),
       [=](auto b, auto w) { return ok(decode_share_bundle(b, id, w)); }},
      {encode_share_inbox(s.inbox(0), id),
       [=](auto b, auto w) { return ok(decode_share_inbox(b, id, w)); }},
      {encode_masked_input(input, id),
       [=](auto b, auto w) { return ok(decode_masked_input(b, id, length, w)); }},
      {encode_unmask_request(request, id),
       [=](auto b, auto w) { return ok(decode_unmask_request(b, id, w)); }},
      {encode_unmask_reply(reply, id),
       [=](auto b, auto w) { return ok(decode_unmask_reply(b, id, w)); }},
  };
}

TEST(SecAggWire, EveryMessageRoundTripsAndIsBoundToItsRoundAndType) {
  const RoundId id{.run_tag = 42, .round = 1, .attempt = 2};
  Sharing s;
  s.share();
  std::string why;
  const auto roster = decode_roster(encode_roster(s.roster, id), id, &why);
  ASSERT_TRUE(roster) << why;
  ASSERT_EQ(roster->clients.size(), 5u);
  EXPECT_EQ(roster->clients[3].client, s.ids[3]);
  EXPECT_EQ(roster->clients[3].s_pk, s.roster.clients[3].s_pk);
  const auto bundle = decode_share_bundle(encode_share_bundle(s.bundles[2], id), id, &why);
  ASSERT_TRUE(bundle) << why;
  EXPECT_EQ(bundle->sender, s.ids[2]);
  EXPECT_EQ(bundle->seed_commitment, s.bundles[2].seed_commitment);
  EXPECT_EQ(bundle->shares[1].recipient, s.bundles[2].shares[1].recipient);
  EXPECT_EQ(bundle->shares[1].sender, s.ids[2]);
  EXPECT_EQ(bundle->shares[1].box, s.bundles[2].shares[1].box);
  const auto messages = every_message(id, 100);
  for (const Encoded& m : messages) {
    EXPECT_TRUE(m.decode(m.bytes, &why)) << why;
    const auto header = peek_header(m.bytes, &why);
    ASSERT_TRUE(header) << why;
    EXPECT_EQ(header->id, id);
  }
  // Another round's message, or another type's, is refused by every decoder.
  for (const RoundId other : {RoundId{43, 1, 2}, RoundId{42, 2, 2}, RoundId{42, 1, 1}}) {
    for (const Encoded& m : every_message(other, 100)) {
      EXPECT_FALSE(messages[0].decode(m.bytes, &why));
    }
    for (size_t a = 0; a < messages.size(); ++a) {
      EXPECT_FALSE(messages[a].decode(every_message(other, 100)[a].bytes, &why));
      EXPECT_NE(why.find("expected 000000000000002a round 1 attempt 2"), std::string::npos) << why;
    }
  }
  for (size_t a = 0; a < messages.size(); ++a) {
    for (size_t b = 0; b < messages.size(); ++b) {
      if (a != b) {
        EXPECT_FALSE(messages[a].decode(messages[b].bytes, &why));
      }
    }
  }
  // A masked input of another length is refused.
  EXPECT_FALSE(decode_masked_input(messages[4].bytes, id, 99, &why));
}

TEST(SecAggWire, GarbageTruncationsAndHugeCountsAreRefusedWithoutACrash) {
  const RoundId id{.run_tag = 42, .round = 1, .attempt = 2};
  const auto messages = every_message(id, 300);
  std::mt19937 rng(15);
  std::string why;
  int64_t accepted = 0;
  for (const Encoded& m : messages) {
    for (size_t len = 0; len < m.bytes.size(); ++len) {
      EXPECT_FALSE(m.decode({m.bytes.data(), len}, &why)) << len;
    }
    Bytes longer = m.bytes;
    longer.push_back(0);
    EXPECT_FALSE(m.decode(longer, &why));
    EXPECT_NE(why.find("bytes after its end"), std::string::npos) << why;
    // Every 4-byte field after the header set to a huge count (and to others).
    for (size_t at = kHeaderBytes; at + 4 <= m.bytes.size(); at += 4) {
      for (const uint32_t v : {0xffffffffu, 0x80000000u, 256u, 255u, 0u}) {
        Bytes forged = m.bytes;
        for (int i = 0; i < 4; ++i) forged[at + i] = static_cast<uint8_t>(v >> (8 * i));
        accepted += m.decode(forged, &why);
      }
    }
    // Random bytes with a valid header, and single-byte mutations.
    for (int trial = 0; trial < 300; ++trial) {
      Bytes junk(std::uniform_int_distribution<size_t>(0, 2 * m.bytes.size())(rng));
      for (uint8_t& b : junk) b = static_cast<uint8_t>(rng());
      EXPECT_FALSE(m.decode(junk, &why));
      std::copy(m.bytes.begin(), m.bytes.begin() + std::min(kHeaderBytes, junk.size()),
                junk.begin());
      accepted += m.decode(junk, &why);
      Bytes mutated = m.bytes;
      mutated[rng() % mutated.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      accepted += m.decode(mutated, &why);
    }
    EXPECT_FALSE(peek_header({m.bytes.data(), kHeaderBytes - 1}, &why));
  }
  // Accepted garbage is garbage of the right shape (a forged key or share byte); what it means is
  // the state machines' to refuse, as the tests above show.
  std::printf("secagg garbage: %lld forged messages were well-formed and decoded\n",
              static_cast<long long>(accepted));
}

// --------------------------------------------------------------------------------- timing ----

TEST(SecAggTiming, MaskingAndUnmaskingA44426ValueUpdate) {
  const int64_t length = 44426;
  for (const int n : {10, 50}) {
    const int t = n / 2 + 1;
    const auto params = make_params(n, t, length);
    const auto ids = client_ids(n);
    const auto updates = random_updates(n, length, 16);
    Dropouts most;
    for (int i = 0; i < n - t; ++i) most.before_masking.insert(ids[i]);
    for (const Dropouts& drop : {Dropouts{}, most}) {
      const Outcome out = run_round(params, ids, updates, drop);
      expect_exact_sum(out, params.fixed);
      std::printf(
          "secagg n=%d t=%d length=%lld dropped=%zu: client mask %.1f ms, server unmask "
          "%.1f ms\n",
          n, t, static_cast<long long>(length), drop.before_masking.size(), 1e3 * out.mask_seconds,
          1e3 * out.finish_seconds);
    }
  }
}

}  // namespace
}  // namespace brigade::secagg
