// Action orders of the four schedules. Each function returns one rank's list; schedule.h explains
// the orders and the papers they come from.
#include "brigade/parallel/pipeline/schedule_builders.h"

#include <algorithm>

namespace brigade::detail {

namespace {

Action act(ActionKind kind, int mb, int chunk = 0) {
  Action a;
  a.kind = kind;
  a.mb = mb;
  a.chunk = chunk;
  return a;
}

}  // namespace

std::vector<Action> gpipe_order(const PipelineShape& shape, int /*rank*/) {
  const int m = shape.micro_batches;
  std::vector<Action> out;
  for (int mb = 0; mb < m; ++mb) out.push_back(act(ActionKind::kForward, mb));
  for (int mb = 0; mb < m; ++mb) out.push_back(act(ActionKind::kBackward, mb));
  return out;
}

std::vector<Action> one_f_one_b_order(const PipelineShape& shape, int rank) {
  const int p = shape.ranks, m = shape.micro_batches;
  const int warmup = std::min(p - rank - 1, m);
  std::vector<Action> out;
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(act(ActionKind::kForward, f));
  while (f < m) {
    out.push_back(act(ActionKind::kForward, f++));
    out.push_back(act(ActionKind::kBackward, b++));
  }
  while (b < m) out.push_back(act(ActionKind::kBackward, b++));
  return out;
}

// Megatron-LM's forward_backward_pipelining_with_interleaving: virtual micro-batch k (0..m v - 1)
// is micro-batch (k / (p v)) p + k % p on chunk (k % (p v)) / p for forwards, and on the mirrored
// chunk v - 1 - that for backwards.
std::vector<Action> interleaved_order(const PipelineShape& shape, int rank) {
  const int p = shape.ranks, m = shape.micro_batches, v = shape.virtual_stages;
  const int total = m * v, group = p * v;
  auto mb_of = [&](int k) { return (k / group) * p + k % p; };
  auto chunk_of = [&](int k, bool forward) {
    const int c = (k % group) / p;
    return forward ? c : v - 1 - c;
  };
  const int warmup = m == p ? total : std::min(total, (p - rank - 1) * 2 + (v - 1) * p);
  std::vector<Action> out;
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(act(ActionKind::kForward, mb_of(f), chunk_of(f, true)));
  while (f < total) {
    out.push_back(act(ActionKind::kForward, mb_of(f), chunk_of(f, true)));
    ++f;
    out.push_back(act(ActionKind::kBackward, mb_of(b), chunk_of(b, false)));
    ++b;
  }
  for (; b < total; ++b) out.push_back(act(ActionKind::kBackward, mb_of(b), chunk_of(b, false)));
  return out;
}

std::vector<Action> zb_h1_order(const PipelineShape& shape, int rank) {
  const int p = shape.ranks, m = shape.micro_batches;
  const int warmup = std::min(p - rank - 1, m);
  const int pairs = std::min(rank + 1, m - warmup);
  std::vector<Action> out;
  int f = 0, b = 0, w = 0;
  for (; f < warmup; ++f) out.push_back(act(ActionKind::kForward, f));
  for (int i = 0; i < pairs; ++i) {
    out.push_back(act(ActionKind::kForward, f++));
    out.push_back(act(ActionKind::kBackwardInput, b++));
  }
  // Steady state: each W frees the micro-batch whose slot the next F takes.
  while (f < m) {
    out.push_back(act(ActionKind::kBackwardWeight, w++));
    out.push_back(act(ActionKind::kForward, f++));
    out.push_back(act(ActionKind::kBackwardInput, b++));
  }
  while (b < m) {
    if (w < b) out.push_back(act(ActionKind::kBackwardWeight, w++));  // none yet when m < p
    out.push_back(act(ActionKind::kBackwardInput, b++));
  }
  while (w < m) out.push_back(act(ActionKind::kBackwardWeight, w++));
  return out;
}

}  // namespace brigade::detail
