#pragma once
// ZeRO-1/2 on the dp axis of the model-parallel trainer (parallel.zero = 1 or 2 with tp/pp):
// the optimizer state of one pipeline chunk's tp shard is split over the dp ranks that hold the
// same shard (same pp and tp coordinates), by whole tensors.
//
// The protocol per update, after the gradients have been averaged over dp (ZeRO-1: the whole
// gradient on every rank, so the global norm and clipping are unchanged; ZeRO-2: each rank's own
// range only, below):
//   1. dp rank r steps only its own range [lo_r, hi_r) of the chunk's flat buffer, with optimizer
//      state for that range alone (about 1/dp of the chunk's);
//   2. the chunk's parameters are re-assembled with one all_gather_v over dp: rank r sends its
//      hi_r - lo_r updated floats; the ranges are contiguous, in dp order, and tile the chunk, so
//      the gathered buffer is the whole chunk.
// Ranges are cut at tensor boundaries so that each rank's state is a set of whole tensors:
// checkpoints declare it under the same names and regions as the unsharded state
// ("adamw.m/<tensor>", tp_state_pieces.h), and a zero = 1 checkpoint loads under zero = 0 and
// back.
//
// ZeRO-1 averages the gradients with the trainer's all-reduce. ZeRO-2 replaces it with
// reduce_scatter_grads: reduce-scatters over dp in which block r is rank r's range (zero-padded
// to the longest range, since the collective needs equal blocks), so each rank receives only
// its own range averaged, half the bytes of an all-reduce; the global norm is then the sum over
// dp of each rank's squares over its range. The stage still owns a full gradient buffer
// (backward writes every tensor's gradient), so ZeRO-2 saves gradient traffic here, not memory.
#include <cstdint>
#include <memory>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/optim/optimizer.h"
#include "brigade/parallel/dp_strategy.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

// Splits layout's tensors, in order, into `parts` contiguous groups of whole tensors balanced by
// size: returns parts + 1 flat offsets 0 = b_0 <= b_1 <= ... <= b_parts = layout.total(), each a
// tensor boundary; part r is [b_r, b_{r+1}) (empty when there are fewer tensors than parts). It
// depends on the layout alone, so every dp rank of a (pp, tp) position computes the same split.
std::vector<int64_t> split_whole_tensors(const ParamLayout& layout, int parts);

// One chunk's optimizer step, sharded over dp (null or size 1: this rank owns everything and no
// communication happens, which is the unsharded step).
class DpShardUpdate {
 public:
  // Floats per rank of one gradient reduce-scatter (ZeRO-2): the staging buffer is dp times it.
  static constexpr int64_t kBucketFloats = int64_t{1} << 16;

  // shard_grads (ZeRO-2) sets up the staging of reduce_scatter_grads.
  DpShardUpdate(const OptimizerConfig& config, const ParamLayout& layout, Communicator* dp,
                bool shard_grads = false);

  // ZeRO-2: grads (the chunk's flat buffer of this replica's gradients) becomes, on
  // [begin(), end()) only, the average over dp; the rest is left as it was and must not be
  // used. Collective over dp, in reduce-scatters of at most kBucketFloats floats per rank.
  void reduce_scatter_grads(float* grads);

  // The tensors of `layout` (the chunk's layout or part of it, same offsets) that lie in
  // [begin(), end()), with offsets from begin(); they must be a contiguous run from begin() (a
  // tensor left out of `layout` may only come after them), so that buffer + begin() is laid out
  // by the result.
  ParamLayout owned_part(const ParamLayout& layout) const;

  // Steps [begin(), end()) of params from grads (both the chunk's whole flat buffers), then
  // all-gathers the ranges over dp into params. Collective over dp. No allocation.
  void step(float* params, const float* grads, float lr, int64_t updates);

  int64_t begin() const { return bounds_[rank_]; }
  int64_t end() const { return bounds_[rank_ + 1]; }
  // Floats of optimizer state this rank holds (every state buffer over its range).
  int64_t state_floats();
  // This rank's optimizer state as tp-shard regions of its own tensors, under "<state>/<tensor>",
  // exactly the pieces the unsharded chunk declares for those tensors.
  std::vector<StatePiece> state_pieces();

 private:
  Communicator* dp_;  // null when there is nothing to shard
  int rank_ = 0;
  std::vector<int64_t> bounds_;  // split_whole_tensors(layout, dp size)
  std::vector<int64_t> counts_;  // bounds_[r + 1] - bounds_[r]: the all_gather_v counts
  ParamLayout owned_;            // the tensors of [begin(), end()), offsets from 0
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<float> send_;    // the updated range, staged (all_gather_v may not alias)
  std::vector<float> rs_in_;   // ZeRO-2: (dp, bucket) padded blocks of one reduce-scatter
  std::vector<float> rs_out_;  // ZeRO-2: this rank's reduced block
};

}  // namespace brigade
