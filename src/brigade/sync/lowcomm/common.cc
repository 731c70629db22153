#include "brigade/sync/lowcomm/common.h"

#include "brigade/base/check.h"
#include "brigade/base/error.h"

namespace brigade {

std::vector<const ParamSpec*> whole_tensors_in_range(const ParamLayout& layout, int64_t begin,
                                                     int64_t end, const std::string& what) {
  if (begin < 0 || begin > end || end > layout.total()) {
    throw ConfigError(what + ": range [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") is outside the " + std::to_string(layout.total()) + " parameters");
  }
  std::vector<const ParamSpec*> out;
  for (const ParamSpec& s : layout.specs()) {
    const int64_t lo = s.offset, hi = s.offset + s.numel;
    if (hi <= begin || lo >= end) continue;
    if (lo < begin || hi > end) {
      throw ConfigError(what + ": range [" + std::to_string(begin) + ", " + std::to_string(end) +
                        ") cuts tensor " + s.name + " [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "); it must consist of whole tensors");
    }
    out.push_back(&s);
  }
  return out;
}

MatrixShape as_matrix(const std::vector<int64_t>& shape) {
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) return {1, shape[0]};
  int64_t cols = 1;
  for (size_t i = 1; i < shape.size(); ++i) cols *= shape[i];
  return {shape[0], cols};
}

Traffic all_gather_equal_traffic(int64_t bytes, int world, int rank) {
  BRIGADE_CHECK(world >= 1 && rank >= 0 && rank < world) << "world " << world << " rank " << rank;
  return Traffic{(world - 1) * bytes, (world - 1) * bytes, ring_allgather_rounds(world)};
}

Traffic all_reduce_f32_traffic(int64_t n, int world, int rank) {
  return all_reduce_traffic(n, WireDtype::kF32, world, rank);
}

Traffic all_reduce_traffic(int64_t n, WireDtype wire, int world, int rank) {
  if (wire == WireDtype::kBF16) return bf16_allreduce_traffic(n, world, rank);
  return ring_allreduce_traffic(4 * n, 4, world, rank, kRingAllReduceSegmentBytes);
}

}  // namespace brigade
