#include "brigade/parallel/shard_reducer.h"

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/monitor/timer.h"

namespace brigade {

ShardReducer::ShardReducer(Communicator& dp, Model& model, const ShardLayout& shards,
                           int64_t bucket_elems, int64_t max_in_flight_elems)
    : dp_(dp),
      model_(model),
      shards_(shards),
      own_(shards.owned(dp.rank())),
      tracker_(plan_aligned_buckets(shards.total(), bucket_elems, FlatBuffer::page_floats())),
      launched_(tracker_.buckets().size(), false),
      max_in_flight_elems_(max_in_flight_elems) {
  BRIGADE_CHECK(shards.world() == dp.size() && model.padded_size() == shards.padded())
      << "shards for " << shards.world() << " ranks over " << shards.padded()
      << " elements; group of " << dp.size() << ", model buffers " << model.padded_size();
  // Everything a step needs is sized here, so backward's hook never allocates.
  int64_t max_piece = 0;
  for (const GradBucket& b : tracker_.buckets()) {
    const FlatRange range{b.begin, b.end};
    send_counts_.push_back(shards_.split(range));
    const int64_t mine = intersect(range, own_).size();
    recv_counts_.emplace_back(static_cast<size_t>(dp.size()), mine);
    max_piece = std::max(max_piece, mine);
  }
  rows_.assign(kRowSlots, std::vector<float>(static_cast<size_t>(max_piece * dp.size())));
  for (int s = kRowSlots - 1; s >= 0; --s) free_slots_.push_back(s);
  model_.set_grad_ready_hook(
      [this](int64_t offset, int64_t count) { on_grad_ready(offset, count); });
}

ShardReducer::~ShardReducer() {
  model_.set_grad_ready_hook(nullptr);
  // Pending exchanges read the gradient buffer and write rows_: finish them before either dies.
  for (auto& f : in_flight_) {
    try {
      f.work->wait();
    } catch (const std::exception&) {
      // The communicator is broken; the error was or will be reported by the caller's path.
    }
  }
}

// Zeroes the non-owned elements of range for the next micro-step, returning whole pages to the
// OS; the elements on a page shared with another range (only the one holding the end of the
// model: buckets and shards start on page boundaries) are zeroed in place instead.
void ShardReducer::zero_unowned(FlatRange range) {
  FlatBuffer& grads = model_.grad_buffer();
  const FlatRange before = intersect(range, {0, own_.begin});
  const FlatRange after = intersect(range, {own_.end, shards_.padded()});
  if (!before.empty()) grads.zero(before.begin, before.end);
  if (!after.empty()) grads.zero(after.begin, after.end);
}

void ShardReducer::start_step() {
  BRIGADE_CHECK(in_flight_.empty() && !armed_) << "start_step() during a step";
  zero_unowned({0, shards_.padded()});
  std::fill(model_.grads() + own_.begin, model_.grads() + own_.end, 0.0f);
}

double ShardReducer::arm() {
  const double waited = drain() + waited_s_;
  waited_s_ = 0;
  tracker_.reset();
  std::fill(launched_.begin(), launched_.end(), false);
  armed_ = true;
  return waited;
}

void ShardReducer::on_grad_ready(int64_t offset, int64_t count) {
  if (!armed_) return;  // a forward-only use of the model (evaluation) reports nothing anyway
  tracker_.mark_ready(offset, count, [this](size_t bucket) { launch(bucket); });
}

void ShardReducer::launch(size_t bucket) {
  // Finished exchanges give their gradient pages back as soon as they are seen (a local decision:
  // what is launched, and in which order, never depends on timing).
  while (!in_flight_.empty() && in_flight_.front().work->is_completed()) complete_oldest();
  const GradBucket& b = tracker_.buckets()[bucket];
  while (!in_flight_.empty() && in_flight_elems_ + b.size() > max_in_flight_elems_) {
    waited_s_ += complete_oldest();
  }
  int slot = -1;
  if (recv_counts_[bucket][0] > 0) {  // this rank owns part of the bucket: it needs rows
    while (free_slots_.empty()) waited_s_ += complete_oldest();
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  launched_[bucket] = true;
  in_flight_elems_ += b.size();
  float* rows = slot >= 0 ? rows_[slot].data() : &no_rows_;  // nothing is received then
  in_flight_.push_back({bucket, slot,
                        dp_.all_to_all_v_async(model_.grads() + b.begin, send_counts_[bucket], rows,
                                               recv_counts_[bucket])});
}

double ShardReducer::complete_oldest() {
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  Stopwatch wait;
  f.work->wait();
  const double waited = wait.seconds();
  const GradBucket& b = tracker_.buckets()[f.bucket];
  const FlatRange mine = intersect({b.begin, b.end}, own_);
  if (f.slot >= 0) {
    // Row p is rank p's contribution to the own piece (row rank() is this rank's, which
    // includes what earlier micro-steps reduced). Summed in rank order, as every rank would.
    float* out = model_.grads() + mine.begin;
    const int64_t n = mine.size();
    const float* rows = rows_[f.slot].data();
    std::copy(rows, rows + n, out);
    for (int p = 1; p < dp_.size(); ++p) {
      const float* row = rows + p * n;
      for (int64_t i = 0; i < n; ++i) out[i] += row[i];
    }
  }
  zero_unowned({b.begin, b.end});
  if (f.slot >= 0) free_slots_.push_back(f.slot);
  in_flight_elems_ -= b.size();
  return waited;
}

double ShardReducer::drain() {
  double waited = 0;
  while (!in_flight_.empty()) waited += complete_oldest();
  return waited;
}

double ShardReducer::finish() {
  BRIGADE_CHECK(armed_) << "finish() without arm()";
  for (size_t i = 0; i < launched_.size(); ++i) {
    if (!launched_[i]) launch(i);
  }
  const double waited = drain() + waited_s_;
  waited_s_ = 0;
  armed_ = false;
  // The rows were summed; dividing once gives the average, as DDP's all-reduce computes it.
  const float world = static_cast<float>(dp_.size());
  float* g = model_.grads();
  for (int64_t i = own_.begin; i < own_.end; ++i) g[i] /= world;
  return waited;
}

}  // namespace brigade
