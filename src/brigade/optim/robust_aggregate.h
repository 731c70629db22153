#pragma once
// Aggregation rules that tolerate a few bad clients (fed.aggregator), over the round's updates
// as flat f32 vectors, sorted by client so that the result does not depend on arrival order:
//
//   median        coordinate-wise median (Yin et al., ICML 2018): tolerates f < n / 2
//   trimmed_mean  per coordinate, the mean after dropping the floor(beta n) largest and smallest
//                 values (Yin et al. 2018): tolerates f <= floor(beta n)
//   krum          the update with the lowest score, the sum of squared distances to its
//                 n - f - 2 nearest others (Blanchard et al., NeurIPS 2017): needs n > 2f + 2
//   multi_krum    the sample-weighted mean of the m lowest-scored updates (m = n - f by default)
//
// and norm bounding (Sun et al. 2019): every update scaled down to an L2 norm bound first.
// The rules are not weighted by example counts (a count is the client's own claim, which an
// attacker would inflate); FedAvg's weighted mean (fed_aggregate.h) stays the "mean" rule.
#include <cstdint>
#include <string>
#include <vector>

namespace brigade {

// Scales v down to L2 norm `bound` when it is longer; returns the norm it had.
double bound_norm(float* v, int64_t n, double bound);

// out[i] = the median of updates[k][i] over k (the mean of the two middle values when the
// count is even). Accumulates nothing across coordinates, so any order of updates gives the
// same bits.
void coordinate_median(const std::vector<const float*>& updates, int64_t n, float* out);

// out[i] = the mean of updates[k][i] without the `trim` smallest and `trim` largest values;
// requires 2 trim < updates.size().
void trimmed_mean(const std::vector<const float*>& updates, int64_t n, int64_t trim, float* out);

// Krum's scores: for each update, the sum of squared L2 distances to its n - f - 2 nearest
// others (in double). Requires updates.size() > 2 f + 2.
std::vector<double> krum_scores(const std::vector<const float*>& updates, int64_t n, int64_t f);

// The indices of the `m` lowest scores, lowest first (ties: the lower index first).
std::vector<int> lowest_scores(const std::vector<double>& scores, int64_t m);

// A rule by name, as fed.aggregator and sync.outer_aggregator name them.
struct RobustRule {
  std::string name = "mean";  // "mean" | "median" | "trimmed_mean" | "krum" | "multi_krum"
  double trim_fraction = 0.1;
  int64_t byzantine = 0;    // f
  int64_t krum_select = 0;  // multi_krum: m; 0: updates - f
};

// out = `rule` over updates (n values each). weights (one per update, or empty for equal ones)
// weigh the mean and Krum's mean of the chosen. Returns the indices the result is made of
// (Krum's chosen ones, ascending; every index for the other rules). Krum needs
// updates.size() > 2 f + 2, the trimmed mean 2 floor(trim_fraction k) < k: the callers check.
std::vector<int> robust_combine(const RobustRule& rule, const std::vector<const float*>& updates,
                                const std::vector<double>& weights, int64_t n, float* out);

}  // namespace brigade
