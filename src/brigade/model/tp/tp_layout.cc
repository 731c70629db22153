#include "brigade/model/tp/tp_layout.h"

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/optim.h"

namespace brigade {

namespace {

// Calls fn(local element, full element) for every non-padding element of every tensor.
template <typename Fn>
void for_each_element(const ParamLayout& local, const ParamLayout& full, Fn&& fn) {
  for (const ParamSpec& s : local.specs()) {
    const ParamSpec& f = full.at(s.name);
    BRIGADE_CHECK(s.full_numel() == f.numel)
        << s.name << ": shard of " << s.full_numel() << " elements, full tensor " << f.numel;
    for (int64_t i = 0; i < s.numel; ++i) {
      const int64_t j = s.full_index(i);
      if (j >= 0) fn(s, s.offset + i, f.offset + j);
    }
  }
}

}  // namespace

void slice_from_full(const ParamLayout& local, const ParamLayout& full, const float* full_buf,
                     float* local_buf) {
  std::fill(local_buf, local_buf + local.total(), 0.0f);
  for_each_element(local, full,
                   [&](const ParamSpec&, int64_t l, int64_t f) { local_buf[l] = full_buf[f]; });
}

void scatter_into_full(const ParamLayout& local, const ParamLayout& full, const float* local_buf,
                       float* full_buf, bool write_replicated) {
  for_each_element(local, full, [&](const ParamSpec& s, int64_t l, int64_t f) {
    if (s.is_tp_shard() || write_replicated) full_buf[f] = local_buf[l];
  });
}

void gather_full(const TpContext& tp, const ParamLayout& local, const ParamLayout& full,
                 const float* local_buf, float* full_buf) {
  std::fill(full_buf, full_buf + full.total(), 0.0f);
  scatter_into_full(local, full, local_buf, full_buf, /*write_replicated=*/tp.rank() == 0);
  // Each element is non-zero on exactly one rank, so the sum is an exact assembly.
  if (tp.active()) tp.comm->all_reduce(full_buf, full.total(), ReduceOp::kSum);
}

double sum_of_squares_full(const TpContext& tp, const ParamLayout& local, const float* local_buf) {
  double sum = 0.0;
  for (const ParamSpec& s : local.specs()) {
    if (!s.is_tp_shard() && tp.rank() != 0) continue;
    sum += sum_squares(local_buf + s.offset, s.numel);
  }
  if (!tp.active()) return sum;
  // The communicator reduces floats: send the double as a float pair (hi + lo), summed
  // separately, so the result keeps more than float precision and is the same on every rank.
  float pair[2] = {static_cast<float>(sum), 0.0f};
  pair[1] = static_cast<float>(sum - static_cast<double>(pair[0]));
  tp.comm->all_reduce(pair, 2, ReduceOp::kSum);
  return static_cast<double>(pair[0]) + static_cast<double>(pair[1]);
}

}  // namespace brigade
