#pragma once
// The communication of Megatron-style tensor parallelism, named for what it does in forward and
// in backward (Megatron's f and g, picotron's tensor_parallel/tp_communications.py). The model
// calls the forward half in its forward and the backward half, at the mirrored place, in its
// explicit backward.
//
// Without sequence parallelism every rank holds the whole (B*T, C) residual stream:
//   f  copy_to_tp:       forward identity (each rank reads the replicated input of a
//                        column-parallel layer); backward all-reduce of the input gradient (each
//                        rank's column shard contributed a part of it).
//   g  reduce_from_tp:   forward all-reduce of a row-parallel layer's partial sums; backward
//                        identity.
// With sequence parallelism each rank holds a contiguous 1/tp of the B*T token rows of the
// residual stream, and the pair becomes
//   gather_from_sequence:      forward all-gather of the rows; backward reduce-scatter.
//   reduce_scatter_to_sequence: forward reduce-scatter of the partial sums; backward
//                               all-gather.
// Bytes are the same (a ring all-reduce is a reduce-scatter followed by an all-gather); what
// changes is that layernorms, residual adds and biases run on 1/tp of the rows.
//
// Every function is a no-op when the context is inactive (tp = 1) and blocks until its
// collective finished. Counts are floats; "rows" counts are per rank.
#include <cstdint>

#include "brigade/model/tp/tp_context.h"

namespace brigade {

// f, backward: dx (n floats) becomes the sum over tp ranks, in place.
void copy_to_tp_backward(const TpContext& tp, float* dx, int64_t n);

// g, forward: y (n floats) becomes the sum over tp ranks, in place.
void reduce_from_tp_forward(const TpContext& tp, float* y, int64_t n);

// Sequence parallel, forward: full (tp * shard_n) = concatenation of every rank's shard.
void gather_from_sequence_forward(const TpContext& tp, const float* shard, float* full,
                                  int64_t shard_n);
// Sequence parallel, backward of the gather: dshard = block tp.rank() of the sum of dfull.
void gather_from_sequence_backward(const TpContext& tp, const float* dfull, float* dshard,
                                   int64_t shard_n);

// Sequence parallel, forward: shard = block tp.rank() of the sum over ranks of partial.
void reduce_scatter_to_sequence_forward(const TpContext& tp, const float* partial, float* shard,
                                        int64_t shard_n);
// Sequence parallel, backward of the reduce-scatter: dfull = concatenation of every dshard.
void reduce_scatter_to_sequence_backward(const TpContext& tp, const float* dshard, float* dfull,
                                         int64_t shard_n);

// Gradients of replicated parameters that each rank computed from its own rows only (the
// layernorm gains and biases under sequence parallelism): sum over tp ranks, in place.
void all_reduce_replicated_grads(const TpContext& tp, float* grad, int64_t n);

// Vocab-parallel cross-entropy: the per-row maximum over the vocab shards (in place), then the
// per-row sums (sum-exp and target logit, in place).
void all_reduce_max(const TpContext& tp, float* data, int64_t n);
void all_reduce_sum(const TpContext& tp, float* data, int64_t n);

}  // namespace brigade
