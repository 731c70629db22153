#pragma once
// DDP: data-parallel replicas keep identical parameters by averaging their gradients.
//
// Before training, parameters are broadcast from dp rank 0. During the backward of the last
// micro-step of a step, each gradient bucket is all-reduced (averaged) asynchronously as soon
// as backward has finished all of its elements, so communication overlaps the rest of backward
// (PyTorch DDP's reducer; Li et al., VLDB 2020). Earlier micro-steps of gradient accumulation
// only accumulate locally. finish() waits for the last bucket; then every replica holds the
// same averaged gradient and takes the same optimizer step.
#include <cstdint>
#include <memory>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/model/model.h"
#include "brigade/parallel/grad_buckets.h"

namespace brigade {

struct DdpOptions {
  int64_t bucket_elems = 256 * 1024;  // 1 MiB of f32
  WireDtype wire = WireDtype::kF32;   // gradient payload; accumulation is always f32
  // train.freeze: gradients of these ranges are not reduced (they are left as backward wrote
  // them, for the strategy to zero) (parallel/grad_buckets.h).
  TrainableMask frozen = {};
  // Launch each bucket as backward finishes it; false: every bucket in finish().
  bool overlap = true;
};

class DataParallel {
 public:
  // Installs a grad-ready hook on model; dp is the communicator of this rank's dp group.
  DataParallel(Communicator& dp, Model& model, DdpOptions options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Makes every replica's parameters equal to dp rank 0's.
  void broadcast_parameters();

  // Call before the backward whose gradients are to be reduced (the last micro-step):
  // buckets are launched as that backward finishes them.
  void arm();

  // Waits until every bucket is reduced (launching any that backward did not finish).
  // Returns the seconds spent waiting here: communication not hidden behind backward.
  double finish();

  int64_t num_buckets() const { return static_cast<int64_t>(tracker_.buckets().size()); }

 private:
  void on_grad_ready(int64_t offset, int64_t count);
  void launch(size_t bucket);

  Communicator& dp_;
  Model& model_;
  DdpOptions options_;
  BucketTracker tracker_;
  std::vector<std::unique_ptr<Work>> in_flight_;
  std::vector<bool> launched_;
  bool armed_ = false;
};

}  // namespace brigade
