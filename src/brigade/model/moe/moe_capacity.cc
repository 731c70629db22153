#include "brigade/model/moe/moe_capacity.h"

#include <algorithm>

namespace brigade {

void assignment_starts(const int64_t* counts, int R, int rank, int64_t E, int K, int64_t* start) {
  for (int64_t e = 0; e < E; ++e) {
    int64_t before = 0;  // every slot < s of every rank, then slot s of ranks < rank
    for (int s = 0; s < K; ++s) {
      int64_t pos = before;
      for (int q = 0; q < rank; ++q) pos += counts[(q * E + e) * K + s];
      start[e * K + s] = pos;
      for (int q = 0; q < R; ++q) before += counts[(q * E + e) * K + s];
    }
  }
}

double MoeStats::load_imbalance() const {
  if (load.empty() || assignments == 0) return 1.0;
  const int64_t mx = *std::max_element(load.begin(), load.end());
  return static_cast<double>(mx) * static_cast<double>(load.size()) /
         static_cast<double>(assignments);
}

void summarize_routing(const int64_t* total_counts, const double* prob_sums, int64_t E, int K,
                       int64_t n_total, int64_t capacity, MoeStats& stats, double* load_fraction) {
  stats.tokens = n_total;
  stats.assignments = n_total * K;
  stats.capacity = capacity;
  stats.dropped = 0;
  double aux = 0.0;
  for (int64_t e = 0; e < E; ++e) {
    int64_t load = 0, kept = 0;
    for (int s = 0; s < K; ++s) {
      // Slots fill in order, so slot s of the whole group starts after all of slots < s.
      kept += kept_assignments(total_counts[e * K + s], load, capacity);
      load += total_counts[e * K + s];
    }
    stats.load[e] = load;
    stats.kept[e] = kept;
    stats.dropped += load - kept;
    const double f = n_total ? static_cast<double>(load) / static_cast<double>(n_total * K) : 0.0;
    const double p = n_total ? prob_sums[e] / static_cast<double>(n_total) : 0.0;
    load_fraction[e] = f;
    aux += f * p;
  }
  stats.aux_loss = static_cast<double>(E) * aux;
}

}  // namespace brigade
