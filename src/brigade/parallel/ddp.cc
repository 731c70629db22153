#include "brigade/parallel/ddp.h"

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/monitor/timer.h"

namespace brigade {

namespace {

bool in_group(const DdpOptions& options, int64_t offset) {
  return std::any_of(options.group.begin(), options.group.end(),
                     [&](const ParamGroup& r) { return offset >= r.begin && offset < r.end; });
}

// plan_grad_buckets' buckets, each cut where a range of the group begins or ends, so that a
// bucket lies wholly inside the group or wholly outside it.
std::vector<GradBucket> plan_buckets(int64_t total, const DdpOptions& options) {
  std::vector<GradBucket> out;
  for (const GradBucket& b : plan_grad_buckets(total, options.bucket_elems, options.frozen)) {
    std::vector<int64_t> cuts = {b.begin, b.end};
    for (const ParamGroup& r : options.group) {
      for (int64_t at : {r.begin, r.end})
        if (at > b.begin && at < b.end) cuts.push_back(at);
    }
    std::sort(cuts.begin(), cuts.end());
    // Listed from the end of the buffer, as plan_grad_buckets lists them.
    for (size_t i = cuts.size() - 1; i > 0; --i) out.push_back({cuts[i - 1], cuts[i]});
  }
  return out;
}

}  // namespace

DataParallel::DataParallel(Communicator& dp, FlatParams& params, DdpOptions options)
    : dp_(dp),
      params_(params),
      options_(std::move(options)),
      tracker_(plan_buckets(params.num_params(), options_)),
      launched_(tracker_.buckets().size(), false) {
  for (const GradBucket& b : tracker_.buckets())
    comm_.push_back(in_group(options_, b.begin) ? options_.group_comm : &dp_);
  in_flight_.reserve(tracker_.buckets().size());
  params_.set_grad_ready_hook(
      [this](int64_t offset, int64_t count) { on_grad_ready(offset, count); });
}

DataParallel::~DataParallel() {
  params_.set_grad_ready_hook(nullptr);
}

void DataParallel::broadcast_parameters() {
  dp_.broadcast(params_.params(), params_.num_params(), 0);
}

void DataParallel::arm(float scale) {
  BRIGADE_CHECK(!armed_) << "arm() twice without finish()";
  armed_ = true;
  scale_ = scale;
  tracker_.reset();
  std::fill(launched_.begin(), launched_.end(), false);
}

void DataParallel::on_grad_ready(int64_t offset, int64_t count) {
  if (!armed_ || !options_.overlap) return;  // accumulation micro-steps: gradients stay local
  tracker_.mark_ready(offset, count, [this](size_t bucket) { launch(bucket); });
}

void DataParallel::launch(size_t bucket) {
  const GradBucket& b = tracker_.buckets()[bucket];
  float* g = params_.grads() + b.begin;
  if (scale_ != 1.0f) std::for_each(g, g + b.size(), [this](float& x) { x *= scale_; });
  launched_[bucket] = true;
  Communicator* comm = comm_[bucket];
  if (comm != nullptr && comm->size() > 1)
    in_flight_.push_back(comm->all_reduce_async(g, b.size(), ReduceOp::kAvg, options_.wire));
}

double DataParallel::finish() {
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
