#pragma once
// Gradient buckets for data parallelism: the flat gradient buffer cut into ranges that are
// reduced as units. Backward finishes parameter ranges from the end of the buffer towards
// the start (see Model::set_grad_ready_hook), so buckets are listed in that order, and a
// bucket is ready as soon as every element of it has been reported final. Readiness is
// counted per element, so buckets need not align with the ranges backward reports, and elements
// that lie in no bucket (frozen ones) are simply not counted.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "brigade/optim/trainable_mask.h"

namespace brigade {

struct GradBucket {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Cuts [0, total) into buckets of bucket_elems elements (the first bucket listed covers the
// end of the buffer; the last one, nearest offset 0, may be shorter). bucket_elems >= 1.
// With frozen ranges (train.freeze, optim/trainable_mask.h) only the trainable parts are cut,
// each on its own (a bucket never spans a frozen range): frozen gradients are in no bucket and
// so never communicated, since they are zeroed before anyone reads them.
std::vector<GradBucket> plan_grad_buckets(int64_t total, int64_t bucket_elems,
                                          const TrainableMask& mask = {});

// Tracks which buckets became ready during one backward pass.
class BucketTracker {
 public:
  explicit BucketTracker(std::vector<GradBucket> buckets);

  const std::vector<GradBucket>& buckets() const { return buckets_; }

  // Starts a new pass: nothing is ready.
  void reset();

  // Marks [offset, offset + count) final and calls on_ready(index) for every bucket this
  // completes, in the order they complete. Reporting an element twice is a programming error.
  template <typename Fn>
  void mark_ready(int64_t offset, int64_t count, Fn&& on_ready);

  bool all_ready() const { return ready_count_ == static_cast<int64_t>(buckets_.size()); }

 private:
  std::vector<GradBucket> buckets_;
  std::vector<int64_t> remaining_;  // elements not yet final, per bucket
  int64_t ready_count_ = 0;
};

template <typename Fn>
void BucketTracker::mark_ready(int64_t offset, int64_t count, Fn&& on_ready) {
  const int64_t end = offset + count;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const GradBucket& b = buckets_[i];
    const int64_t overlap = std::min(end, b.end) - std::max(offset, b.begin);
    if (overlap <= 0) continue;
    remaining_[i] -= overlap;
    if (remaining_[i] == 0) {
      ++ready_count_;
      on_ready(i);
    }
  }
}

}  // namespace brigade
