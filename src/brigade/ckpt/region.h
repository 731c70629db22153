#pragma once
// Region: which elements of a global tensor a shard piece holds, in one representation that
// covers both ways a layout cuts tensors:
//
//   box   (flat = false): start/count per dimension of the tensor's own shape. Tensor-parallel
//         row and column splits: W (768, 3072) split by columns over tp=2 -> rank 1 holds
//         start {0, 1536}, count {768, 1536}.
//   range (flat = true):  start/count of one dimension over the row-major flattening, i.e. a
//         box in the view (numel,). ZeRO flat-range shards that cut a tensor mid-row.
//
// Either way a piece's elements are stored in row-major order of the region, which is also
// increasing order of their global flat index. So every region is a sorted list of contiguous
// flat runs, and two regions overlap exactly where their runs do: that is all resharding needs.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace brigade {

struct Region {
  bool flat = false;
  std::vector<int64_t> start;  // per dimension of the view (shape, or (numel,) when flat)
  std::vector<int64_t> count;

  static Region box(std::vector<int64_t> start, std::vector<int64_t> count) {
    return Region{false, std::move(start), std::move(count)};
  }
  // Elements [begin, end) of the row-major flattening.
  static Region range(int64_t begin, int64_t end) { return Region{true, {begin}, {end - begin}}; }
  // The whole tensor, as a box.
  static Region whole(const std::vector<int64_t>& shape) {
    return Region{false, std::vector<int64_t>(shape.size(), 0), shape};
  }

  int64_t numel() const;  // product(count); 1 for a box of a scalar
  // "box[0:768, 1536:3072]" or "range[100:250]".
  std::string to_string() const;
  bool operator==(const Region&) const = default;
};

// Why `region` does not fit a tensor of `shape` (rank mismatch, negative or out-of-bounds
// start/count, overflow), or nullopt if it does. Use before any other function below.
std::optional<std::string> region_error(const Region& region, const std::vector<int64_t>& shape);

// A contiguous run [begin, end) of global flat indices.
struct FlatRun {
  int64_t begin = 0;
  int64_t end = 0;
};

// The region's elements as maximal contiguous runs, in increasing order (= storage order).
// Trailing dimensions a box covers fully are merged into one run.
std::vector<FlatRun> region_runs(const Region& region, const std::vector<int64_t>& shape);

// How many runs region_runs() returns, computed without building them (so that a region read
// from a file can be refused before it allocates). The region must fit the shape.
int64_t region_run_count(const Region& region, const std::vector<int64_t>& shape);

// The smallest [first, last) flat interval holding every element of the region (empty: 0, 0).
FlatRun region_span(const Region& region, const std::vector<int64_t>& shape);

// One common stretch of two regions: `length` elements that sit at element offset a_offset in
// region a's storage and at b_offset in region b's, both contiguous.
struct RegionOverlap {
  int64_t a_offset = 0;
  int64_t b_offset = 0;
  int64_t length = 0;
};

// Every stretch the two regions share, in increasing flat order, adjacent stretches merged
// when contiguous on both sides.
std::vector<RegionOverlap> region_overlap(const Region& a, const Region& b,
                                          const std::vector<int64_t>& shape);

}  // namespace brigade
