#pragma once
// Moving values between a tensor-parallel rank's flat buffer (its ParamLayout of shards, see
// ParamSpec::full_index) and the full, tp = 1 layout of the same model: for checkpoints (which
// are always written in the full layout), for loading them back, and for tests that compare a
// tp = k run with the tp = 1 run. Tensors are matched by name; vocab padding is dropped on the
// way out and zero on the way in.
#include "brigade/model/tp/tp_context.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

// local_buf (local.total()) = this rank's shard of every tensor, read from full_buf
// (full.total()). Padding elements become 0. Needs no communication.
void slice_from_full(const ParamLayout& local, const ParamLayout& full, const float* full_buf,
                     float* local_buf);

// Writes the elements this rank holds into full_buf: the shard's positions of split tensors,
// and replicated tensors whole when write_replicated. Other elements are left alone.
void scatter_into_full(const ParamLayout& local, const ParamLayout& full, const float* local_buf,
                       float* full_buf, bool write_replicated);

// Every tp rank gets full_buf (full.total()) = the tp = 1 layout assembled from all ranks'
// local_buf: split tensors from their shards, replicated tensors from tp rank 0. Collective
// over tp.comm (one all-reduce of the whole model); a copy when tp is inactive.
void gather_full(const TpContext& tp, const ParamLayout& local, const ParamLayout& full,
                 const float* local_buf, float* full_buf);

// sum of x^2 over the whole (tp = 1) model from every rank's local buffer (gradients, for the
// global norm that clipping needs): split tensors from every shard, replicated tensors once
// (from tp rank 0), padding excluded (it is zero anyway). Identical on every rank; collective
// over tp.comm (one all-reduce of 2 floats).
double sum_of_squares_full(const TpContext& tp, const ParamLayout& local, const float* local_buf);

}  // namespace brigade
