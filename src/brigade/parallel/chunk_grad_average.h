#pragma once
// Averages one pipeline chunk's gradients over its replicas while the step's backward still
// runs (Megatron's overlap_grad_reduce), the model-parallel counterpart of DataParallel
// (ddp.h). The chunk's flat gradient buffer is cut into buckets, each inside one range group:
// expert tensors are averaged over dp (the ranks holding the same experts), everything else
// over dp x ep (GptStage::expert_ranges / dense_ranges; a group of size 1 is left as it is). The
// stage reports ranges final during its last backward of the step (GptStage's grad-ready
// hook); a bucket's all-reduce starts once all its elements are, so a chunk's later blocks
// travel while its earlier ones, and other pipeline stages, still compute.
//
// Per step: arm(scale) before the schedule runs; finish() after it, which launches what the
// hook did not (nothing, normally; everything with overlap = false, which reduces the same
// buckets in the same order, so the result is bitwise the same), waits, and returns the seconds
// it waited: the exposed part.
// scale multiplies each bucket right before its all-reduce (a replica's share of a masked
// batch, micro_batch_weights.h), which must come before the average.
#include <cstdint>
#include <memory>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/model/gpt_stage.h"
#include "brigade/parallel/grad_buckets.h"

namespace brigade {

class ChunkGradAverage {
 public:
  // Installs the grad-ready hook on stage (removed again by the destructor). dp: the ranks that
  // hold the same experts; replicas: dp x ep (dp itself when ep = 1). bucket_floats >= 1.
  // overlap = false: nothing starts before finish() (parallel.overlap_grad_reduce = false).
  ChunkGradAverage(GptStage& stage, Communicator& dp, Communicator& replicas, int64_t bucket_floats,
                   bool overlap = true);
  ~ChunkGradAverage();
  ChunkGradAverage(const ChunkGradAverage&) = delete;
  ChunkGradAverage& operator=(const ChunkGradAverage&) = delete;

  void arm(float scale);
  double finish();

  int64_t num_buckets() const { return static_cast<int64_t>(tracker_.buckets().size()); }

 private:
  void launch(size_t bucket);

  GptStage& stage_;
  std::vector<Communicator*> comm_;  // per bucket: dp (experts) or replicas (the rest)
  BucketTracker tracker_;
  std::vector<bool> launched_;
  std::vector<std::unique_ptr<Work>> in_flight_;
  float scale_ = 1.0f;
  bool overlap_;
  bool armed_ = false;
};

}  // namespace brigade
