#include "brigade/parallel/ddp.h"

#include "brigade/base/check.h"
#include "brigade/monitor/timer.h"

namespace brigade {

DataParallel::DataParallel(Communicator& dp, Model& model, DdpOptions options)
    : dp_(dp),
      model_(model),
      options_(options),
      tracker_(plan_grad_buckets(model.num_params(), options.bucket_elems, options.frozen)),
      launched_(tracker_.buckets().size(), false) {
  in_flight_.reserve(tracker_.buckets().size());
  model_.set_grad_ready_hook(
      [this](int64_t offset, int64_t count) { on_grad_ready(offset, count); });
}

DataParallel::~DataParallel() {
  model_.set_grad_ready_hook(nullptr);
}

void DataParallel::broadcast_parameters() {
  dp_.broadcast(model_.params(), model_.num_params(), 0);
}

void DataParallel::arm() {
  BRIGADE_CHECK(!armed_) << "arm() twice without finish()";
  armed_ = true;
  tracker_.reset();
  std::fill(launched_.begin(), launched_.end(), false);
}

void DataParallel::on_grad_ready(int64_t offset, int64_t count) {
  if (!armed_ || !options_.overlap) return;  // accumulation micro-steps: gradients stay local
  tracker_.mark_ready(offset, count, [this](size_t bucket) { launch(bucket); });
}

void DataParallel::launch(size_t bucket) {
  const GradBucket& b = tracker_.buckets()[bucket];
  launched_[bucket] = true;
  in_flight_.push_back(
      dp_.all_reduce_async(model_.grads() + b.begin, b.size(), ReduceOp::kAvg, options_.wire));
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
