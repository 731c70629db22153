#include "brigade/parallel/zero_shard.h"

#include <algorithm>

#include "brigade/base/check.h"

namespace brigade {

namespace {

int64_t round_up(int64_t x, int64_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

}  // namespace

FlatRange intersect(FlatRange a, FlatRange b) {
  const int64_t begin = std::max(a.begin, b.begin);
  const int64_t end = std::min(a.end, b.end);
  return end > begin ? FlatRange{begin, end} : FlatRange{begin, begin};
}

ShardLayout::ShardLayout(int64_t total, int world, int64_t align) : total_(total), world_(world) {
  BRIGADE_CHECK(total >= 0 && world >= 1 && align >= 1)
      << "total " << total << " world " << world << " align " << align;
  shard_ = round_up((total + world - 1) / world, align);
}

FlatRange ShardLayout::shard_of(int r) const {
  BRIGADE_CHECK(r >= 0 && r < world_) << "rank " << r << " of " << world_;
  return {r * shard_, (r + 1) * shard_};
}

FlatRange ShardLayout::owned(int r) const {
  const FlatRange s = shard_of(r);
  return {std::min(s.begin, total_), std::min(s.end, total_)};
}

std::vector<int64_t> ShardLayout::split(FlatRange range) const {
  std::vector<int64_t> counts(static_cast<size_t>(world_), 0);
  for (int r = 0; r < world_; ++r) counts[r] = intersect(range, owned(r)).size();
  return counts;
}

std::vector<int> ShardLayout::owners(FlatRange range) const {
  std::vector<int> out;
  for (int r = 0; r < world_; ++r) {
    if (!intersect(range, owned(r)).empty()) out.push_back(r);
  }
  return out;
}

std::vector<GradBucket> plan_aligned_buckets(int64_t total, int64_t bucket_elems, int64_t align) {
  BRIGADE_CHECK(total >= 0 && bucket_elems >= 1 && align >= 1)
      << total << " " << bucket_elems << " " << align;
  const int64_t step = round_up(bucket_elems, align);
  std::vector<GradBucket> buckets;
  for (int64_t begin = (total - 1) / step * step; total > 0 && begin >= 0; begin -= step) {
    buckets.push_back({begin, std::min(total, begin + step)});
  }
  return buckets;
}

}  // namespace brigade
