#pragma once
// A tensor-parallel rank's flat buffer as pieces of the checkpoint's global tensors, so that a
// model-parallel run saves and loads through the same sharded checkpointer as data parallelism
// (checkpointing.h) without gathering anything. Every tensor keeps its GPT-2 name and its full,
// tp = 1 shape; a shard is a box region of it (ckpt/region.h) whose row-major elements are
// exactly the shard's local storage:
//   - kDim0 (column-parallel weights and their biases, the vocab-parallel wte): a range of rows
//     per block of the split dim (c_attn's q, k and v are three blocks, so three pieces);
//   - kDim1 (row-parallel c_proj): a range of columns over every row, one box;
//   - replicated tensors: the whole tensor, declared identically by every tp rank and by both
//     holders of the tied wte, so the shard plan writes it once.
// Rows of vocab padding (the vocab rounded up to a multiple of tp) lie outside the full tensor
// and are simply not declared: never written, and left as they are (zero) on load.
#include <string>
#include <vector>

#include "brigade/parallel/dp_strategy.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

// The pieces of buf (local.total() floats, laid out by local) under the tensors' names, each
// prefixed by name_prefix ("" for parameters, "adamw.m/" for an optimizer state buffer).
std::vector<StatePiece> tp_state_pieces(const ParamLayout& local, float* buf,
                                        const std::string& name_prefix = "");

}  // namespace brigade
