#pragma once
// How ZeRO cuts the flat parameter space among the dp ranks (Rajbhandari et al., SC 2020).
//
// The flat buffers [0, total) are padded to `padded = world * shard` elements, with `shard`
// the smallest multiple of `align` that is >= ceil(total / world); rank r owns the shard
// [r * shard, (r + 1) * shard). Every rank thus holds the same number of elements (equal
// blocks for all_gather and reduce_scatter), and with align = one memory page every shard
// starts on a page, so a rank can release the pages of everything it does not own. The part
// of a shard beyond `total` is padding: it is never trained, reduced or saved, and a rank's
// optimizer covers only owned(r) = its shard clipped to [0, total), which may be empty for
// the last ranks of a tiny model.
#include <cstdint>
#include <vector>

#include "brigade/base/flat_range.h"
#include "brigade/parallel/grad_buckets.h"

namespace brigade {

// [a.begin, a.end) intersected with [b.begin, b.end); empty (begin == end) when disjoint.
FlatRange intersect(FlatRange a, FlatRange b);

class ShardLayout {
 public:
  // total >= 0 elements shared by world >= 1 ranks, shards a multiple of align >= 1.
  ShardLayout(int64_t total, int world, int64_t align);

  int64_t total() const { return total_; }
  int world() const { return world_; }
  int64_t shard() const { return shard_; }
  int64_t padded() const { return shard_ * world_; }

  // Rank r's shard of the padded space: [r * shard, (r + 1) * shard).
  FlatRange shard_of(int r) const;
  // The model elements rank r owns: shard_of(r) clipped to [0, total).
  FlatRange owned(int r) const;
  // How many elements of [range.begin, range.end) each rank owns, in rank order; they sum to
  // range.size() for a range inside [0, total), and the pieces lie in rank order in the range.
  std::vector<int64_t> split(FlatRange range) const;
  // The ranks owning part of range, in rank order.
  std::vector<int> owners(FlatRange range) const;

 private:
  int64_t total_;
  int world_;
  int64_t shard_;
};

// Gradient buckets for reduce-scatter: [0, total) cut at multiples of `step`, where step is
// bucket_elems rounded up to a multiple of align (so buckets start on page boundaries), listed
// from the end of the buffer towards offset 0 (the order backward finishes them).
std::vector<GradBucket> plan_aligned_buckets(int64_t total, int64_t bucket_elems, int64_t align);

}  // namespace brigade
