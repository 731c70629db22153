#include "brigade/parallel/chunk_grad_average.h"

#include <algorithm>
#include <utility>

#include "brigade/base/check.h"
#include "brigade/monitor/timer.h"

namespace brigade {

namespace {

struct GroupBucket {
  GradBucket range;
  bool expert = false;
};

// Buckets of at most bucket_floats inside each range group, listed from the end of the buffer
// towards its start (the order backward finishes them, as plan_grad_buckets lists them).
std::vector<GroupBucket> plan_chunk_buckets(const GptStage& stage, int64_t bucket_floats) {
  std::vector<GroupBucket> ranges;
  for (const ParamGroup& r : stage.expert_ranges()) ranges.push_back({{r.begin, r.end}, true});
  for (const ParamGroup& r : stage.dense_ranges()) ranges.push_back({{r.begin, r.end}, false});
  std::sort(ranges.begin(), ranges.end(), [](const GroupBucket& a, const GroupBucket& b) {
    return a.range.begin > b.range.begin;
  });
  std::vector<GroupBucket> out;
  for (const GroupBucket& r : ranges) {
    for (int64_t end = r.range.end; end > r.range.begin; end -= bucket_floats) {
      out.push_back({{std::max(r.range.begin, end - bucket_floats), end}, r.expert});
    }
  }
  return out;
}

std::vector<GradBucket> ranges_of(const std::vector<GroupBucket>& buckets) {
  std::vector<GradBucket> out;
  for (const GroupBucket& b : buckets) out.push_back(b.range);
  return out;
}

}  // namespace

ChunkGradAverage::ChunkGradAverage(GptStage& stage, Communicator& dp, Communicator& replicas,
                                   int64_t bucket_floats, bool overlap)
    : stage_(stage),
      tracker_(ranges_of(plan_chunk_buckets(stage, std::max<int64_t>(1, bucket_floats)))),
      overlap_(overlap) {
  BRIGADE_CHECK(bucket_floats > 0) << "bucket_floats " << bucket_floats;
  for (const GroupBucket& b : plan_chunk_buckets(stage, bucket_floats))
    comm_.push_back(b.expert ? &dp : &replicas);
  launched_.assign(comm_.size(), false);
  in_flight_.reserve(comm_.size());
  stage_.set_grad_ready_hook([this](int64_t offset, int64_t count) {
    if (armed_ && overlap_) tracker_.mark_ready(offset, count, [this](size_t b) { launch(b); });
  });
}

ChunkGradAverage::~ChunkGradAverage() {
  stage_.set_grad_ready_hook(nullptr);
}

void ChunkGradAverage::arm(float scale) {
  BRIGADE_CHECK(!armed_) << "arm() twice without finish()";
  armed_ = true;
  scale_ = scale;
  tracker_.reset();
  std::fill(launched_.begin(), launched_.end(), false);
}

void ChunkGradAverage::launch(size_t bucket) {
  const GradBucket& b = tracker_.buckets()[bucket];
  float* g = stage_.grads() + b.begin;
  if (scale_ != 1.0f) std::for_each(g, g + b.size(), [this](float& x) { x *= scale_; });
  launched_[bucket] = true;
  if (comm_[bucket]->size() > 1)
    in_flight_.push_back(comm_[bucket]->all_reduce_async(g, b.size(), ReduceOp::kAvg));
}

double ChunkGradAverage::finish() {
  BRIGADE_CHECK(armed_) << "finish() without arm()";
  for (size_t i = 0; i < launched_.size(); ++i) {
    if (!launched_[i]) launch(i);
  }
  Stopwatch wait;
  for (auto& work : in_flight_) work->wait();
  in_flight_.clear();
  armed_ = false;
  return wait.seconds();
}

}  // namespace brigade
