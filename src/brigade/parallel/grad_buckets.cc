#include "brigade/parallel/grad_buckets.h"

#include <algorithm>

#include "brigade/base/check.h"

namespace brigade {

std::vector<GradBucket> plan_grad_buckets(int64_t total, int64_t bucket_elems,
                                          const TrainableMask& mask) {
  BRIGADE_CHECK(total >= 0 && bucket_elems >= 1) << total << " " << bucket_elems;
  std::vector<GradBucket> buckets;
  const std::vector<FrozenRange> parts = mask.trainable_parts(0, total);
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
    for (int64_t end = part->end; end > part->begin; end -= bucket_elems) {
      buckets.push_back({std::max<int64_t>(part->begin, end - bucket_elems), end});
    }
  }
  return buckets;
}

BucketTracker::BucketTracker(std::vector<GradBucket> buckets) : buckets_(std::move(buckets)) {
  reset();
}

void BucketTracker::reset() {
  remaining_.resize(buckets_.size());
  for (size_t i = 0; i < buckets_.size(); ++i) remaining_[i] = buckets_[i].size();
  ready_count_ = 0;
}

}  // namespace brigade
