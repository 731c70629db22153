#pragma once
// DDP: data-parallel replicas keep identical parameters by averaging their gradients.
//
// Before training, parameters are broadcast from dp rank 0. During the backward of the last
// micro-step of a step, each gradient bucket is all-reduced (averaged) asynchronously as soon
// as backward has finished all of its elements, so communication overlaps the rest of backward
// (PyTorch DDP's reducer; Li et al., VLDB 2020). Earlier micro-steps of gradient accumulation
// only accumulate locally. finish() waits for the last bucket; then every replica holds the
// same averaged gradient and takes the same optimizer step.
//
// It runs on any FlatParams: a whole model (the data-parallel engine) or one pipeline chunk's tp
// shard (the model-parallel engine, Megatron's overlap_grad_reduce), whose stage reports ranges
// final during its last backward of the step. A chunk's expert tensors have other replicas than
// its dense ones (the ranks holding the same experts, dp, against dp x ep): DdpOptions::group
// lists those ranges and their communicator, and no bucket spans the two.
#include <cstdint>
#include <memory>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/model/flat_params.h"
#include "brigade/model/model.h"
#include "brigade/parallel/grad_buckets.h"

namespace brigade {

struct DdpOptions {
  int64_t bucket_elems = 256 * 1024;  // 1 MiB of f32
  WireDtype wire = WireDtype::kF32;   // gradient payload; accumulation is always f32
  // train.freeze: gradients of these ranges are not reduced (they are left as backward wrote
  // them, for the strategy to zero) (parallel/grad_buckets.h).
  TrainableMask frozen = {};
  // Launch each bucket as backward finishes it; false: every bucket in finish() (the same
  // buckets in the same order, so the same result bit for bit).
  bool overlap = true;
  // Ranges averaged over group_comm instead of dp (a chunk's expert tensors), or with
  // group_comm null left as they are (each rank's own experts); none by default.
  std::vector<ParamGroup> group = {};
  Communicator* group_comm = nullptr;
};

class DataParallel {
 public:
  // Installs a grad-ready hook on params; dp is the communicator of this rank's replicas. A
  // communicator of one rank is left out (its average is the gradient itself).
  DataParallel(Communicator& dp, FlatParams& params, DdpOptions options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Makes every replica's parameters equal to dp rank 0's.
  void broadcast_parameters();

  // Call before the backward whose gradients are to be reduced (the last micro-step): buckets
  // are launched as that backward finishes them. Each bucket is multiplied by scale right before
  // it is sent (a replica's share of a masked batch, which must weigh before the average).
  void arm(float scale = 1.0f);

  // Waits until every bucket is reduced (launching any that backward did not finish).
  // Returns the seconds spent waiting here: communication not hidden behind backward.
  double finish();

  int64_t num_buckets() const { return static_cast<int64_t>(tracker_.buckets().size()); }

 private:
  void on_grad_ready(int64_t offset, int64_t count);
  void launch(size_t bucket);

  Communicator& dp_;
  FlatParams& params_;
  DdpOptions options_;
  BucketTracker tracker_;
  std::vector<Communicator*> comm_;  // per bucket: dp, or group_comm for the group's ranges
  std::vector<std::unique_ptr<Work>> in_flight_;
  std::vector<bool> launched_;
  float scale_ = 1.0f;
  bool armed_ = false;
};

}  // namespace brigade
