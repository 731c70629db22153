// Partitioning for federated clients (data/partition.h): every scheme assigns each example
// once, is a function of the seed, and has the shape NIID-Bench's scheme promises; the gamma
// sampler under the Dirichlet draws matches its moments; bad options name themselves.
#include "brigade/data/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "brigade/base/error.h"
#include "brigade/data/random_stream.h"
#include "data_test_util.h"

namespace brigade {
namespace {

using testing::expect_throw_mentioning;

constexpr int32_t kClasses = 10;

// n labels, class c holding a share that grows with c (so "near the global histogram" is not
// the same as "uniform"), in a scrambled order.
std::vector<int32_t> skewed_labels(int64_t n) {
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t scrambled = (i * 7919) % n;  // 7919 is prime, n is not a multiple of it
    labels[static_cast<size_t>(i)] = static_cast<int32_t>(
        std::sqrt(static_cast<double>(scrambled) / static_cast<double>(n) * 100.0));
  }
  return labels;
}

// Fashion-MNIST's shape: 6000 examples of each of 10 classes.
std::vector<int32_t> balanced_labels(int64_t n = 60000) {
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % 10);
  return labels;
}

PartitionOptions options(PartitionScheme scheme, int64_t clients, uint64_t seed = 1) {
  PartitionOptions o;
  o.scheme = scheme;
  o.clients = clients;
  o.seed = seed;
  return o;
}

// Every index in [0, n) appears in exactly one client, except those in `unassigned`.
void expect_each_example_once(const Partition& p, int64_t n,
                              const std::vector<bool>& unassigned = {}) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (const auto& c : p.clients) {
    EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
    for (int64_t i : c) {
      ASSERT_TRUE(i >= 0 && i < n) << i;
      ++seen[static_cast<size_t>(i)];
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const int want = !unassigned.empty() && unassigned[static_cast<size_t>(i)] ? 0 : 1;
    ASSERT_EQ(seen[static_cast<size_t>(i)], want) << "example " << i;
  }
}

std::vector<double> shares(const std::vector<int64_t>& histogram) {
  const double total = static_cast<double>(std::accumulate(histogram.begin(), histogram.end(), 0));
  std::vector<double> s;
  for (int64_t h : histogram) s.push_back(static_cast<double>(h) / total);
  return s;
}

// Half the L1 distance between two distributions: 0 identical, 1 disjoint.
double total_variation(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) d += std::abs(a[i] - b[i]);
  return d / 2.0;
}

std::vector<int64_t> all_indices(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

const PartitionScheme kSchemes[] = {PartitionScheme::kIid, PartitionScheme::kDirichlet,
                                    PartitionScheme::kLabels, PartitionScheme::kQuantity};

TEST(Partition, EverySchemeAssignsEachExampleOnce) {
  const auto labels = skewed_labels(20011);
  for (PartitionScheme scheme : kSchemes) {
    for (int64_t clients : {1, 7, 10, 100}) {
      SCOPED_TRACE(std::string(scheme_name(scheme)) + " x " + std::to_string(clients));
      PartitionOptions o = options(scheme, clients);
      o.labels_per_client = 3;
      // Dir(0.5) sizes over 100 clients leave one below 10 examples in nearly every draw
      // (each does with probability ~0.2): NIID-Bench's minimum needs a larger beta there.
      o.beta = 5.0;
      const Partition p = partition_examples(labels, kClasses, o);
      ASSERT_EQ(p.clients.size(), static_cast<size_t>(clients));
      // Fewer clients than labels x C: some labels may have no holder (checked below).
      std::vector<bool> unassigned(labels.size(), false);
      for (int32_t k : p.unheld_labels) {
        for (size_t i = 0; i < labels.size(); ++i) unassigned[i] = unassigned[i] || labels[i] == k;
      }
      expect_each_example_once(p, static_cast<int64_t>(labels.size()), unassigned);
      if (scheme != PartitionScheme::kLabels || clients >= kClasses) {
        EXPECT_TRUE(p.unheld_labels.empty());
      }
    }
  }
}

TEST(Partition, IsAFunctionOfTheSeed) {
  const auto labels = skewed_labels(5003);
  for (PartitionScheme scheme : kSchemes) {
    SCOPED_TRACE(scheme_name(scheme));
    const Partition a = partition_examples(labels, kClasses, options(scheme, 10, 7));
    const Partition b = partition_examples(labels, kClasses, options(scheme, 10, 7));
    const Partition c = partition_examples(labels, kClasses, options(scheme, 10, 8));
    EXPECT_EQ(a.clients, b.clients);
    EXPECT_NE(a.clients, c.clients);
  }
}

// Pins the stream: a change to the generator, the samplers or the cuts would silently move
// every published partition, so it must show here. Values recorded from this implementation.
TEST(Partition, DirichletSizesArePinnedForSeedZero) {
  const Partition p =
      partition_examples(balanced_labels(), kClasses, options(PartitionScheme::kDirichlet, 5, 0));
  std::vector<size_t> sizes;
  for (const auto& c : p.clients) sizes.push_back(c.size());
  EXPECT_EQ(sizes, (std::vector<size_t>{13040, 12617, 10865, 10335, 13143}));
  EXPECT_EQ(p.attempts, 1);
}

TEST(Partition, IidPartsDifferByAtMostOneAndMirrorTheLabels) {
  const auto labels = skewed_labels(60001);
  const auto global = shares(label_histogram(labels, all_indices(60001), kClasses));
  const Partition p = partition_examples(labels, kClasses, options(PartitionScheme::kIid, 10));
  for (const auto& c : p.clients) {
    EXPECT_TRUE(c.size() == 6000 || c.size() == 6001) << c.size();
    // 6000 draws: a class share's standard error is at most sqrt(0.25 / 6000) = 0.0065;
    // the total variation over 10 classes stays below 0.04 (about 6 standard errors).
    EXPECT_LT(total_variation(shares(label_histogram(labels, c, kClasses)), global), 0.04);
  }
}

TEST(Partition, LabelsGivesEachClientExactlyCLabels) {
  const auto labels = balanced_labels();
  for (int32_t c : {1, 2, 3, 10}) {
    SCOPED_TRACE("C = " + std::to_string(c));
    PartitionOptions o = options(PartitionScheme::kLabels, 20);
    o.labels_per_client = c;
    const Partition p = partition_examples(labels, kClasses, o);
    for (size_t i = 0; i < p.clients.size(); ++i) {
      const auto h = label_histogram(labels, p.clients[i], kClasses);
      EXPECT_EQ(std::count_if(h.begin(), h.end(), [](int64_t n) { return n > 0; }), c);
      EXPECT_GT(h[i % kClasses], 0) << "client " << i << " must hold label " << i % kClasses;
    }
    // A label's holders split it evenly: their counts of it differ by at most 1.
    for (int32_t k = 0; k < kClasses; ++k) {
      int64_t least = INT64_MAX, most = 0;
      for (const auto& client : p.clients) {
        const int64_t n = label_histogram(labels, client, kClasses)[k];
        if (n == 0) continue;
        least = std::min(least, n);
        most = std::max(most, n);
      }
      if (most > 0) {
        EXPECT_LE(most - least, 1) << "label " << k;
      }
    }
  }
}

// --label-sets names each client's labels (a published draw): each client holds exactly those,
// a label's holders split it evenly, and every example of a held label is assigned once.
TEST(Partition, LabelSetsGiveEachClientExactlyItsLabels) {
  const auto labels = balanced_labels(2000);
  PartitionOptions o = options(PartitionScheme::kLabels, 4);
  o.label_sets = {{0, 7}, {7, 1}, {2}, {7, 0, 3}};
  const Partition p = partition_examples(labels, kClasses, o);
  for (size_t i = 0; i < p.clients.size(); ++i) {
    const auto h = label_histogram(labels, p.clients[i], kClasses);
    for (int32_t k = 0; k < kClasses; ++k) {
      const auto& set = o.label_sets[i];
      EXPECT_EQ(h[k] > 0, std::find(set.begin(), set.end(), k) != set.end())
          << "client " << i << ", label " << k;
    }
  }
  // Label 7 (200 examples) on three clients: 67, 67, 66; label 0 on two: 100 each.
  EXPECT_EQ(label_histogram(labels, p.clients[0], kClasses)[0], 100);
  for (size_t i : {0, 1, 3}) {
    const int64_t n = label_histogram(labels, p.clients[i], kClasses)[7];
    EXPECT_TRUE(n == 66 || n == 67) << n;
  }
  EXPECT_EQ(p.unheld_labels, (std::vector<int32_t>{4, 5, 6, 8, 9}));
  std::vector<bool> unheld(2000);
  for (size_t i = 0; i < unheld.size(); ++i) unheld[i] = labels[i] >= 4 && labels[i] != 7;
  expect_each_example_once(p, 2000, unheld);
}

TEST(Partition, LabelsReportsLabelsNobodyHolds) {
  // 3 clients x 1 label: labels 0, 1, 2 are held; 3..9 are not.
  PartitionOptions o = options(PartitionScheme::kLabels, 3);
  o.labels_per_client = 1;
  const Partition p = partition_examples(balanced_labels(1000), kClasses, o);
  EXPECT_EQ(p.unheld_labels, (std::vector<int32_t>{3, 4, 5, 6, 7, 8, 9}));
  for (const auto& c : p.clients) EXPECT_EQ(c.size(), 100u);
}

// Dir(alpha) label skew, measured by the largest two classes' share of each client and by
// the total variation (TV) between a client's label shares and the global ones. With
// alpha = 0.1 a client's classes concentrate on one or two: the mean top-2 share over clients
// is above 0.7. With alpha = 100 a client's share of a class is a normalised Dir(100) draw,
// 0.1 with standard deviation about sqrt(0.9 / 1001) = 0.0095, so the TV is near
// 0.5 * 10 * 0.8 * 0.0095 = 0.04: required below 0.06 on average over clients and below 0.1
// for each (NIID-Bench's balance cut-off adds a little), and every top-2 share below 0.3.
TEST(Partition, DirichletSkewFollowsAlpha) {
  const auto labels = balanced_labels();
  const auto global = shares(label_histogram(labels, all_indices(60000), kClasses));
  auto top2_share = [&](const std::vector<int64_t>& client) {
    auto s = shares(label_histogram(labels, client, kClasses));
    std::sort(s.rbegin(), s.rend());
    return s[0] + s[1];
  };
  for (uint64_t seed : {1, 2, 3}) {
    PartitionOptions skewed = options(PartitionScheme::kDirichlet, 10, seed);
    skewed.alpha = 0.1;
    const Partition p = partition_examples(labels, kClasses, skewed);
    double mean_top2 = 0.0;
    for (const auto& c : p.clients) mean_top2 += top2_share(c) / 10.0;
    EXPECT_GT(mean_top2, 0.7) << "seed " << seed;

    PartitionOptions flat = options(PartitionScheme::kDirichlet, 10, seed);
    flat.alpha = 100.0;
    const Partition q = partition_examples(labels, kClasses, flat);
    double mean_tv = 0.0;
    for (const auto& c : q.clients) {
      const double tv = total_variation(shares(label_histogram(labels, c, kClasses)), global);
      EXPECT_LT(tv, 0.1);
      mean_tv += tv / 10.0;
      EXPECT_LT(top2_share(c), 0.3);
    }
    EXPECT_LT(mean_tv, 0.06) << "seed " << seed;
  }
}

// Sizes ~ Dir(beta): with beta = 0.5 over 10 clients they spread widely (largest / smallest
// above 3; a Dir(0.5) component has coefficient of variation about 1.3), while each client's
// labels are an IID sample (total variation from the global histogram below 0.1 for clients
// of 500 or more examples: 10 standard errors of sqrt(0.25 / 500) / 2 per class, summed).
TEST(Partition, QuantitySizesVaryAndLabelsStayIid) {
  const auto labels = skewed_labels(60000);
  const auto global = shares(label_histogram(labels, all_indices(60000), kClasses));
  for (uint64_t seed : {1, 2, 3}) {
    const Partition p =
        partition_examples(labels, kClasses, options(PartitionScheme::kQuantity, 10, seed));
    size_t least = SIZE_MAX, most = 0;
    for (const auto& c : p.clients) {
      least = std::min(least, c.size());
      most = std::max(most, c.size());
      if (c.size() >= 500) {
        EXPECT_LT(total_variation(shares(label_histogram(labels, c, kClasses)), global), 0.1);
      }
    }
    EXPECT_GT(static_cast<double>(most) / static_cast<double>(least), 3.0) << "seed " << seed;
  }
}

// The minimum-size rule: a small concentration over many clients leaves some client below
// the minimum in most draws; the partition redraws until every client holds min_client_size,
// and says when no draw in max_attempts does. Parameters are picked so that a draw succeeds
// with probability about 0.05 (quantity: each of 20 Dir(2) sizes is below 1/60 with
// probability ~0.15, 0.85^20 = 0.04).
TEST(Partition, RedrawsUntilEveryClientHasTheMinimum) {
  const auto labels = balanced_labels(6000);
  PartitionOptions dirichlet = options(PartitionScheme::kDirichlet, 50);
  dirichlet.alpha = 0.3;
  dirichlet.min_client_size = 40;
  PartitionOptions quantity = options(PartitionScheme::kQuantity, 20);
  quantity.beta = 2.0;
  quantity.min_client_size = 100;
  for (PartitionOptions o : {dirichlet, quantity}) {
    SCOPED_TRACE(scheme_name(o.scheme));
    const Partition p = partition_examples(labels, kClasses, o);
    EXPECT_GT(p.attempts, 1) << "the rule was not exercised";
    for (const auto& c : p.clients) EXPECT_GE(c.size(), static_cast<size_t>(o.min_client_size));

    o.max_attempts = p.attempts - 1;  // every draw before the accepted one failed
    expect_throw_mentioning<ConfigError>([&] { partition_examples(labels, kClasses, o); },
                                         "none of " + std::to_string(o.max_attempts) + " draws");
  }
}

TEST(Partition, UnlabelledDataAllowsIidAndQuantityOnly) {
  const Partition iid = partition_unlabelled(1001, options(PartitionScheme::kIid, 10));
  expect_each_example_once(iid, 1001);
  const Partition quantity = partition_unlabelled(1001, options(PartitionScheme::kQuantity, 10));
  expect_each_example_once(quantity, 1001);
  for (PartitionScheme scheme : {PartitionScheme::kDirichlet, PartitionScheme::kLabels}) {
    expect_throw_mentioning<ConfigError>([&] { partition_unlabelled(1001, options(scheme, 10)); },
                                         "needs labelled examples");
  }
}

TEST(Partition, BadOptionsNameTheOptionAndWhatIsAllowed) {
  const auto labels = balanced_labels(1000);
  auto refused = [&](PartitionOptions o, const std::string& needle) {
    expect_throw_mentioning<ConfigError>([&] { partition_examples(labels, kClasses, o); }, needle);
  };
  refused(options(PartitionScheme::kIid, 0), "--clients = 0: must be in [1, 10000]");
  refused(options(PartitionScheme::kIid, 10001), "--clients = 10001: must be in [1, 10000]");
  refused(options(PartitionScheme::kIid, 1001), "holds 1000 examples");
  refused(options(PartitionScheme::kDirichlet, 101), "at least 10 examples (1010 in all)");
  PartitionOptions o = options(PartitionScheme::kDirichlet, 10);
  o.alpha = 0.0;
  refused(o, "--alpha = 0: must be a finite number > 0");
  o.alpha = std::nan("");
  refused(o, "--alpha = nan");
  o = options(PartitionScheme::kQuantity, 10);
  o.beta = -1.0;
  refused(o, "--beta = -1: must be a finite number > 0");
  o = options(PartitionScheme::kLabels, 10);
  o.labels_per_client = 11;
  refused(o, "--labels-per-client = 11: must be in [1, 10]");
  o.labels_per_client = 0;
  refused(o, "--labels-per-client = 0");
  o = options(PartitionScheme::kLabels, 2);
  o.label_sets = {{0, 1}};
  refused(o, "--label-sets: 1 sets for --clients = 2");
  o.label_sets = {{0, 1}, {3, 10}};
  refused(o, "client 1 holds [3, 10]: each client needs distinct labels in [0, 9]");
  o.label_sets = {{0, 1}, {2, 2}};
  refused(o, "client 1 holds [2, 2]");
  o.label_sets = {{0, 1}, {}};
  refused(o, "client 1 holds []");
  expect_throw_mentioning<ConfigError>([] { parse_scheme("noniid"); },
                                       "--scheme = \"noniid\": allowed values are \"iid\"");
  EXPECT_EQ(parse_scheme("dirichlet"), PartitionScheme::kDirichlet);
}

// Marsaglia-Tsang against the closed-form moments: Gamma(k, theta) has mean k theta and
// variance k theta^2. With n = 200000 draws the sample mean's standard error is
// sqrt(k / n) theta, the variance's about sqrt(2 k^2 (1 + 3 / k) / n) theta^2 (the gamma's
// excess kurtosis is 6 / k); both are held to 5 standard errors.
TEST(RandomStream, GammaMatchesMeanAndVariance) {
  constexpr int kDraws = 200000;
  for (double shape : {0.1, 0.5, 1.0, 2.5, 30.0}) {
    for (double scale : {1.0, 3.0}) {
      SCOPED_TRACE("shape " + std::to_string(shape) + " scale " + std::to_string(scale));
      RandomStream rng(42, static_cast<uint64_t>(shape * 1000.0));
      double sum = 0.0, sum2 = 0.0;
      for (int i = 0; i < kDraws; ++i) {
        const double x = sample_gamma(rng, shape, scale);
        ASSERT_GT(x, 0.0);
        sum += x;
        sum2 += x * x;
      }
      const double mean = sum / kDraws;
      const double var = sum2 / kDraws - mean * mean;
      const double mean_se = std::sqrt(shape / kDraws) * scale;
      const double var_se =
          std::sqrt(2.0 * shape * shape * (1.0 + 3.0 / shape) / kDraws) * scale * scale;
      EXPECT_NEAR(mean, shape * scale, 5.0 * mean_se);
      EXPECT_NEAR(var, shape * scale * scale, 5.0 * var_se);
    }
  }
}

TEST(RandomStream, DirichletSumsToOneAndNeverUnderflowsToZero) {
  RandomStream rng(1, 2);
  for (double concentration : {1e-3, 0.1, 1.0, 100.0}) {
    const auto p = sample_dirichlet(rng, concentration, 100);
    EXPECT_NEAR(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-12);
    EXPECT_EQ(*std::max_element(p.begin(), p.end()) > 0.0, true);
  }
}

TEST(RandomStream, NextBelowIsUniform) {
  RandomStream rng(3, 4);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) ++counts[rng.next_below(7)];
  // 10000 expected per value, standard deviation about 93: within 5 of them.
  for (int c : counts) EXPECT_NEAR(c, 10000, 465);
}

}  // namespace
}  // namespace brigade
