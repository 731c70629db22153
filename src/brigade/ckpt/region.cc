#include "brigade/ckpt/region.h"

#include <algorithm>

#include "brigade/base/check.h"

namespace brigade {

namespace {

// The shape the region's start/count index: the tensor's own, or (numel,) for a flat range.
std::vector<int64_t> view_shape(const Region& r, const std::vector<int64_t>& shape) {
  if (!r.flat) return shape;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // overflow ruled out by region_error's caller contract
  return {n};
}

}  // namespace

int64_t Region::numel() const {
  int64_t n = 1;
  for (int64_t c : count) n *= c;
  return n;
}

std::string Region::to_string() const {
  std::string s = flat ? "range[" : "box[";
  for (size_t i = 0; i < start.size() && i < count.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(start[i]) + ":" + std::to_string(start[i] + count[i]);
  }
  return s + "]";
}

std::optional<std::string> region_error(const Region& r, const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(numel, d, &numel)) return "tensor shape overflows";
  }
  const std::vector<int64_t> view = r.flat ? std::vector<int64_t>{numel} : shape;
  if (r.start.size() != view.size() || r.count.size() != view.size()) {
    return (r.flat ? std::string("a flat range needs 1 start and 1 count, got ")
                   : "a box of a " + std::to_string(shape.size()) +
                         "-dimensional tensor needs as many starts and counts, got ") +
           std::to_string(r.start.size()) + " and " + std::to_string(r.count.size());
  }
  for (size_t i = 0; i < view.size(); ++i) {
    int64_t end = 0;
    if (r.start[i] < 0 || r.count[i] < 0 || __builtin_add_overflow(r.start[i], r.count[i], &end) ||
        end > view[i]) {
      return r.to_string() + " does not fit dimension " + std::to_string(i) + " of size " +
             std::to_string(view[i]);
    }
  }
  return std::nullopt;
}

int64_t region_run_count(const Region& r, const std::vector<int64_t>& shape) {
  const std::vector<int64_t> view = view_shape(r, shape);
  if (view.empty()) return 1;
  for (int64_t c : r.count) {
    if (c == 0) return 0;
  }
  size_t k = view.size() - 1;
  while (k > 0 && r.start[k] == 0 && r.count[k] == view[k]) --k;
  int64_t n = 1;
  for (size_t i = 0; i < k; ++i) n *= r.count[i];  // <= numel: no overflow
  return n;
}

std::vector<FlatRun> region_runs(const Region& r, const std::vector<int64_t>& shape) {
  const std::vector<int64_t> view = view_shape(r, shape);
  const size_t nd = view.size();
  std::vector<FlatRun> runs;
  if (nd == 0) {  // a scalar: one element
    runs.push_back({0, 1});
    return runs;
  }
  for (int64_t c : r.count) {
    if (c == 0) return runs;
  }
  // strides[i]: flat distance between neighbours along dimension i.
  std::vector<int64_t> strides(nd, 1);
  for (size_t i = nd - 1; i > 0; --i) strides[i - 1] = strides[i] * view[i];
  // Dimensions after k are covered fully, so a run spans count[k] * strides[k] elements.
  size_t k = nd - 1;
  while (k > 0 && r.start[k] == 0 && r.count[k] == view[k]) --k;
  const int64_t run_len = r.count[k] * strides[k];
  int64_t n_runs = 1;
  for (size_t i = 0; i < k; ++i) n_runs *= r.count[i];
  runs.reserve(static_cast<size_t>(n_runs));
  std::vector<int64_t> idx(k, 0);  // odometer over the dimensions before k
  for (int64_t n = 0; n < n_runs; ++n) {
    int64_t begin = r.start[k] * strides[k];
    for (size_t i = 0; i < k; ++i) begin += (r.start[i] + idx[i]) * strides[i];
    runs.push_back({begin, begin + run_len});
    for (size_t i = k; i-- > 0;) {
      if (++idx[i] < r.count[i]) break;
      idx[i] = 0;
    }
  }
  return runs;
}

FlatRun region_span(const Region& r, const std::vector<int64_t>& shape) {
  const std::vector<int64_t> view = view_shape(r, shape);
  if (r.numel() == 0) return {0, 0};
  int64_t first = 0, last = 0, stride = 1;
  for (size_t i = view.size(); i-- > 0;) {
    first += r.start[i] * stride;
    last += (r.start[i] + r.count[i] - 1) * stride;
    stride *= view[i];
  }
  return {first, last + 1};
}

std::vector<RegionOverlap> region_overlap(const Region& a, const Region& b,
                                          const std::vector<int64_t>& shape) {
  std::vector<RegionOverlap> out;
  const FlatRun sa = region_span(a, shape), sb = region_span(b, shape);
  if (sa.begin >= sb.end || sb.begin >= sa.end) return out;  // cheap reject: no common span
  const std::vector<FlatRun> ra = region_runs(a, shape), rb = region_runs(b, shape);
  size_t i = 0, j = 0;
  int64_t a_pos = 0, b_pos = 0;  // storage offsets of ra[i].begin and rb[j].begin
  while (i < ra.size() && j < rb.size()) {
    const int64_t lo = std::max(ra[i].begin, rb[j].begin);
    const int64_t hi = std::min(ra[i].end, rb[j].end);
    if (lo < hi) {
      const RegionOverlap o{a_pos + (lo - ra[i].begin), b_pos + (lo - rb[j].begin), hi - lo};
      if (!out.empty() && out.back().a_offset + out.back().length == o.a_offset &&
          out.back().b_offset + out.back().length == o.b_offset) {
        out.back().length += o.length;
      } else {
        out.push_back(o);
      }
    }
    // Advance whichever run ends first (both if they end together).
    if (ra[i].end <= rb[j].end) {
      a_pos += ra[i].end - ra[i].begin;
      ++i;
    } else {
      b_pos += rb[j].end - rb[j].begin;
      ++j;
    }
  }
  return out;
}

}  // namespace brigade
