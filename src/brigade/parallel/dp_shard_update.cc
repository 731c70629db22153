#include "brigade/parallel/dp_shard_update.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "brigade/base/check.h"
#include "brigade/parallel/tp_state_pieces.h"

namespace brigade {

std::vector<int64_t> split_whole_tensors(const ParamLayout& layout, int parts) {
  BRIGADE_CHECK(parts >= 1) << "parts " << parts;
  std::vector<int64_t> edges = {0};  // every tensor boundary, ascending
  for (const ParamSpec& s : layout.specs()) edges.push_back(s.offset + s.numel);
  const int64_t total = layout.total();
  BRIGADE_CHECK(edges.back() == total) << "layout of " << total << " floats is not contiguous";
  // Boundary k goes to the tensor edge nearest the ideal cut k * total / parts, never before the
  // previous boundary: a greedy cut, deterministic from the layout alone.
  std::vector<int64_t> bounds = {0};
  size_t e = 0;
  for (int k = 1; k < parts; ++k) {
    const double ideal = static_cast<double>(total) * k / parts;
    while (e + 1 < edges.size() && std::abs(static_cast<double>(edges[e + 1]) - ideal) <=
                                       std::abs(static_cast<double>(edges[e]) - ideal)) {
      ++e;
    }
    bounds.push_back(edges[e]);
  }
  bounds.push_back(total);
  return bounds;
}

DpShardUpdate::DpShardUpdate(const OptimizerConfig& config, const ParamLayout& layout,
                             Communicator* dp, bool shard_grads)
    : dp_(dp != nullptr && dp->size() > 1 ? dp : nullptr),
      rank_(dp_ ? dp_->rank() : 0),
      bounds_(split_whole_tensors(layout, dp_ ? dp_->size() : 1)) {
  for (size_t r = 0; r + 1 < bounds_.size(); ++r) counts_.push_back(bounds_[r + 1] - bounds_[r]);
  owned_ = tensors_within(layout, begin(), end());
  BRIGADE_CHECK(owned_.total() == end() - begin())
      << "range [" << begin() << ", " << end() << ") is not whole tensors";
  optimizer_ = make_optimizer(config, layout, begin(), end());
  send_.resize(static_cast<size_t>(end() - begin()));
  if (dp_ && shard_grads) {  // staging of reduce_scatter_grads, allocated once here
    const int64_t longest = *std::max_element(counts_.begin(), counts_.end());
    const int64_t bucket = std::min(longest, kBucketFloats);
    rs_in_.resize(static_cast<size_t>(dp_->size() * bucket));
    rs_out_.resize(static_cast<size_t>(bucket));
  }
}

void DpShardUpdate::reduce_scatter_grads(float* grads) {
  if (!dp_) return;
  const int n = dp_->size();
  const int64_t longest = *std::max_element(counts_.begin(), counts_.end());
  const int64_t bucket = std::min(longest, kBucketFloats);
  BRIGADE_CHECK(static_cast<int64_t>(rs_out_.size()) == bucket) << "created without shard_grads";
  // Bucket j covers elements [at, at + len) of every rank's range; a range shorter than that
  // contributes zeros, which nobody reads back. Every rank runs the same buckets.
  for (int64_t at = 0; at < longest; at += bucket) {
    const int64_t len = std::min(bucket, longest - at);
    for (int r = 0; r < n; ++r) {
      float* block = rs_in_.data() + r * len;
      const int64_t have = std::clamp<int64_t>(counts_[r] - at, 0, len);
      std::copy_n(grads + bounds_[r] + at, have, block);
      std::fill(block + have, block + len, 0.0f);
    }
    dp_->reduce_scatter(rs_in_.data(), rs_out_.data(), len, ReduceOp::kAvg);
    const int64_t mine = std::clamp<int64_t>(counts_[rank_] - at, 0, len);
    std::copy_n(rs_out_.data(), mine, grads + begin() + at);
  }
}

ParamLayout DpShardUpdate::owned_part(const ParamLayout& layout) const {
  ParamLayout out;
  for (const ParamSpec& s : layout.specs()) {
    if (s.offset < begin() || s.offset + s.numel > end()) continue;
    BRIGADE_CHECK(s.offset == begin() + out.total())
        << s.name << " at " << s.offset << " leaves a gap after " << begin() + out.total();
    out.add(s);
  }
  return out;
}

void DpShardUpdate::step(float* params, const float* grads, float lr, int64_t updates) {
  optimizer_->step(params, grads, begin(), end(), lr, updates);
  if (!dp_) return;
  std::copy_n(params + begin(), send_.size(), send_.data());
  dp_->all_gather_v(send_.data(), params, counts_);
}

int64_t DpShardUpdate::state_floats() {
  int64_t n = 0;
  for (const StateView& v : optimizer_->state_tensors()) n += v.end - v.begin;
  return n;
}

std::vector<StatePiece> DpShardUpdate::state_pieces() {
  std::vector<StatePiece> out;
  for (const StateView& v : optimizer_->state_tensors()) {
    BRIGADE_CHECK(v.begin == begin() && v.end == end())
        << v.name << " covers [" << v.begin << ", " << v.end << ")";
    // owned_'s offsets start at 0 where the state buffer does (flat element begin()).
    for (StatePiece& p : tp_state_pieces(owned_, v.data, v.name + "/")) out.push_back(p);
  }
  return out;
}

}  // namespace brigade
