#pragma once
// Who gets an expert's seats when more assignments (token, choice) want it than its capacity.
//
// Priority: every first choice (slot 0) before any second choice (slot 1), as in GShard; within
// a slot, by token position in the union of the tokens routed together: rank-major under
// expert parallelism (rank 0's tokens, then rank 1's, ...), so an ep group of k ranks keeps
// exactly the assignments that one process routing the concatenated tokens keeps. The first
// `capacity` assignments in that order are kept; the rest are dropped and counted.
//
// Load-balancing loss (Switch Transformer, eq. 4): aux = E * sum_e f_e * P_e over the N tokens
// routed together, with f_e the fraction of assignments the router sends to e before capacity
// (count / (N * top_k), so sum_e f_e = 1 and aux = 1 under uniform routing for k = 1 and 2) and
// P_e the mean router probability of e. f_e is piecewise constant: gradient flows through P_e.
#include <cstdint>
#include <vector>

namespace brigade {

// counts is (R, E, K): assignments of each of R ranks per expert and slot. Writes start (E,K):
// how many assignments to e precede `rank`'s slot-s assignments in priority order.
void assignment_starts(const int64_t* counts, int R, int rank, int64_t E, int K, int64_t* start);

// Of `count` assignments whose first has priority position `start`, how many fit under
// capacity (capacity < 0: dropless, all of them).
inline int64_t kept_assignments(int64_t count, int64_t start, int64_t capacity) {
  if (capacity < 0) return count;
  const int64_t room = capacity - start;
  return room <= 0 ? 0 : (room < count ? room : count);
}

// Per-forward statistics of a MoE layer, over all the tokens routed together (the ep group's
// union under expert parallelism, identical on its ranks).
struct MoeStats {
  int64_t tokens = 0;         // N
  int64_t assignments = 0;    // N * top_k
  int64_t dropped = 0;        // assignments over capacity (tokens, for top_k = 1)
  int64_t capacity = -1;      // per expert; -1 dropless
  std::vector<int64_t> load;  // (E) assignments the router sent to each expert
  std::vector<int64_t> kept;  // (E) of those, computed (load minus dropped)
  double aux_loss = 0.0;      // E * sum_e f_e P_e, before the coefficient

  double dropped_fraction() const {
    return assignments ? static_cast<double>(dropped) / static_cast<double>(assignments) : 0.0;
  }
  // max_e load / mean load: 1 is perfect balance, E is everything on one expert.
  double load_imbalance() const;
};

// Fills stats (load and kept must already have E entries) and load_fraction (E, f_e) from the
// group's total counts (E,K) and probability sums (E) over n_total tokens.
void summarize_routing(const int64_t* total_counts, const double* prob_sums, int64_t E, int K,
                       int64_t n_total, int64_t capacity, MoeStats& stats, double* load_fraction);

}  // namespace brigade
