#include "brigade/model/tp/tp_comm.h"

#include <algorithm>

namespace brigade {

namespace {

void sum_in_place(const TpContext& tp, float* data, int64_t n) {
  if (tp.active() && n > 0) tp.comm->all_reduce(data, n, ReduceOp::kSum);
}

}  // namespace

void copy_to_tp_backward(const TpContext& tp, float* dx, int64_t n) {
  sum_in_place(tp, dx, n);
}

void reduce_from_tp_forward(const TpContext& tp, float* y, int64_t n) {
  sum_in_place(tp, y, n);
}

void gather_from_sequence_forward(const TpContext& tp, const float* shard, float* full,
                                  int64_t shard_n) {
  if (!tp.active()) {
    if (full != shard) std::copy(shard, shard + shard_n, full);
    return;
  }
  tp.comm->all_gather(shard, full, shard_n);
}

void gather_from_sequence_backward(const TpContext& tp, const float* dfull, float* dshard,
                                   int64_t shard_n) {
  if (!tp.active()) {
    if (dfull != dshard) std::copy(dfull, dfull + shard_n, dshard);
    return;
  }
  tp.comm->reduce_scatter(dfull, dshard, shard_n, ReduceOp::kSum);
}

void reduce_scatter_to_sequence_forward(const TpContext& tp, const float* partial, float* shard,
                                        int64_t shard_n) {
  gather_from_sequence_backward(tp, partial, shard, shard_n);
}

void reduce_scatter_to_sequence_backward(const TpContext& tp, const float* dshard, float* dfull,
                                         int64_t shard_n) {
  gather_from_sequence_forward(tp, dshard, dfull, shard_n);
}

void all_reduce_replicated_grads(const TpContext& tp, float* grad, int64_t n) {
  sum_in_place(tp, grad, n);
}

void all_reduce_max(const TpContext& tp, float* data, int64_t n) {
  if (tp.active() && n > 0) tp.comm->all_reduce(data, n, ReduceOp::kMax);
}

void all_reduce_sum(const TpContext& tp, float* data, int64_t n) {
  sum_in_place(tp, data, n);
}

}  // namespace brigade
