#pragma once
// ZeRO data parallelism (Rajbhandari et al., SC 2020): replicas split the training state instead
// of each holding all of it. The flat space is cut into one equal shard per dp rank
// (parallel/zero_shard.h); each rank's optimizer (and its state) covers only its shard.
//
//   stage 1  optimizer state sharded. Gradients are all-reduced in buckets overlapping backward
//            (as DDP); each rank steps its shard, then the parameters are all-gathered.
//   stage 2  + gradients sharded. Each bucket is reduce-scattered as backward finishes it (every
//            micro-step), and the pages of gradients other ranks own are released; then as 1.
//   stage 3  + parameters sharded. Only the own shard stays resident; forward and backward
//            gather each layer group just before use, prefetching the next, and release it
//            after (parallel/sharded_params.h). The step updates the shard in place: no
//            all-gather after it.
//
// Resident bytes per parameter with f32 AdamW on N ranks: DDP 16; stage 1: 8 + 8/N; stage 2:
// 4 + 12/N; stage 3: 16/N (plus the groups and buckets in flight). See docs/parallelism.md.
//
// The global gradient norm is the sum over ranks of each shard's sum of squares. In a checkpoint
// each rank saves its own shard of the optimizer state (and, under ZeRO-3, of the parameters)
// as flat ranges of the unpadded global tensors, which every strategy reads.
#include <memory>
#include <vector>

#include "brigade/parallel/ddp.h"
#include "brigade/parallel/dp_strategy.h"
#include "brigade/parallel/shard_reducer.h"
#include "brigade/parallel/sharded_params.h"
#include "brigade/parallel/zero_shard.h"

namespace brigade {

class ZeroStrategy : public DpStrategy {
 public:
  // Pads model's flat buffers to the shard layout for dp.size() ranks and installs the hooks the
  // stage needs. Throws ConfigError for stage 3 on a model without param groups, and for a bf16
  // gradient wire with stage 2 or 3.
  ZeroStrategy(Communicator& dp, Model& model, const OptimizerConfig& optimizer_config,
               const DpOptions& options);
  ~ZeroStrategy() override;

  const ShardLayout& shards() const { return shards_; }
  // Stage 3's parameter gatherer (null below stage 3), for its counters.
  const ShardedParams* gatherer() const { return gatherer_.get(); }
  int zero_stage() const override { return stage_; }
  Optimizer& optimizer() override { return *optimizer_; }

  void start_step() override;
  void before_backward(bool last_micro_step) override;
  double finish_gradients() override;
  double grad_sum_squares() override;
  void scale_grads(float scale) override;
  void step(float lr, int64_t step) override;

  std::vector<StatePiece> checkpoint_pieces() override;
  void after_restore(bool resumed) override;
  // Stage 3: each rank read its own shard, which rank 0's copy must not overwrite.
  void after_initial_weights() override;

  void begin_full_params() override;
  void end_full_params() override;

 private:
  // Stages 1 and 2: steps the own shard chunk by chunk and all-gathers each updated chunk,
  // so the update of chunk k + 1 overlaps the all-gather of chunk k.
  void step_and_all_gather(float lr, int64_t step);
  void finish_gather_chunk(int64_t k);

  Communicator& dp_;
  Model& model_;
  int stage_;
  ShardLayout shards_;
  FlatRange own_;
  std::unique_ptr<Optimizer> optimizer_;
  TrainableMask frozen_;                     // train.freeze over the model's layout
  std::unique_ptr<DataParallel> ddp_;        // stage 1: gradient all-reduce
  std::unique_ptr<ShardReducer> reducer_;    // stages 2, 3: gradient reduce-scatter
  std::unique_ptr<ShardedParams> gatherer_;  // stage 3: parameter groups on demand

  int64_t chunk_;                     // all-gather chunk (elements per rank)
  std::vector<float> gather_in_[2];   // (chunk_): own slice, double-buffered
  std::vector<float> gather_out_[2];  // (world, chunk_)
  std::unique_ptr<Work> gather_work_[2];
  double exposed_s_ = 0;  // waits between micro-steps, reported by finish_gradients()
};

}  // namespace brigade
