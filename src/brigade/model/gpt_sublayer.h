#pragma once
// The pieces every GPT sublayer is made of, with tensor parallelism folded in. A pre-LN
// sublayer of the residual stream is
//   x -> layernorm -> [enter] column-parallel matmul -> op -> row-parallel matmul [exit] -> + x
// and the model's head is the same entry (ln_f, then the vocab-parallel unembedding). [enter]
// and [exit] are Megatron's f and g (parallel/tensor/tp_comm.h): without sequence parallelism
// every rank holds all B*T rows of the residual stream and they are "copy / all-reduce"; with it
// each rank holds `rows` = B*T/tp of them and they are "all-gather / reduce-scatter". The
// layernorm and the residual add always run on this rank's rows.
#include <cstdint>
#include <vector>

#include "brigade/model/gpt_config.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/model/lora.h"
#include "brigade/model/tp/tp_context.h"

namespace brigade {

class OpProfiler;

// What every piece reads during one forward or backward.
struct GptPass {
  const GptConfig* config = nullptr;
  const GptShard* shard = nullptr;
  const TpContext* tp = nullptr;
  OpProfiler* profiler = nullptr;  // may be null
  int64_t B = 0, T = 0;
  int64_t BT = 0;    // token rows of the micro-batch
  int64_t rows = 0;  // residual-stream rows on this rank: BT, or BT / tp with sequence parallel
  int64_t row0 = 0;  // first of them in the flattened (B,T) grid
  int64_t C = 0;
};

// Buffers shared by every block and the head (sized once for the largest micro-batch).
struct GptScratch {
  std::vector<float> full;   // (BT,C): row-parallel partial sums; gathered residual gradient
  std::vector<float> din;    // (BT,C): gradient of a column-parallel layer's input
  std::vector<float> rows;   // (rows,C), sequence parallel only: layernorm output, its gradient
  std::vector<float> d4c_a;  // (BT,4C/tp)
  std::vector<float> d4c_b;  // (BT,4C/tp)
  std::vector<float> dnorm;  // (2C): sequence-parallel layernorm gain and bias gradients
  std::vector<float> lora_u, lora_du;  // (BT,r): LoRA adapters' low-rank activations
  std::vector<float> lora_part;        // (r,C): a column-parallel adapter's dA before its sum
  void allocate(int64_t max_bt, int64_t max_rows, int64_t C, int64_t fc_local,
                int64_t lora_rank = 0);
};

// The LoRA site of adapter `params` (off when the layer has none): A and B read from p, their
// gradients accumulated into g (null in forward), scratch from s.
LoraSite lora_site(const GptPass& pass, const LoraParams& params, const float* p, float* g,
                   GptScratch& s);

// Forward of "layernorm, then enter a column-parallel layer": in_full (BT,C) = the layernorm of
// x (rows,C), gathered over ranks under sequence parallelism. Saves mean and rstd (rows).
void norm_enter_forward(const GptPass& pass, float* in_full, float* mean, float* rstd,
                        const float* x, const float* w, const float* b, GptScratch& s);

// Backward of it: din_full (BT,C) is this rank's partial gradient of in_full (overwritten);
// adds the layernorm's input gradient to dres (rows,C) and its parameter gradients to dw, db
// (summed over tp ranks first under sequence parallelism, where each rank saw its rows only).
void norm_enter_backward(const GptPass& pass, float* dres, float* dw, float* db, float* din_full,
                         const float* x, const float* w, const float* mean, const float* rstd,
                         GptScratch& s);

// Forward of a row-parallel matmul leaving into the residual stream: out (rows,C) = x +
// reduce(inp @ weight^T) + bias, inp (BT,in_local), weight (C,in_local). At tp = 1 the bias goes
// into the matmul (the exact tp = 1 arithmetic); otherwise it is added once, after the sum.
// A LoRA adapter (tp = 1 only) adds its term to the matmul's output.
void row_parallel_exit_forward(const GptPass& pass, float* out, const float* x, const float* inp,
                               const float* weight, const float* bias, int64_t in_local,
                               GptScratch& s, const LoraSite& lora = {});

// Backward of it: the gradient of out is dres (rows,C); accumulates dinp (BT,in_local), dweight
// and dbias (the bias gradient is taken over all BT rows, so it is the same on every rank).
void row_parallel_exit_backward(const GptPass& pass, float* dinp, float* dweight, float* dbias,
                                const float* dres, const float* inp, const float* weight,
                                int64_t in_local, GptScratch& s, const LoraSite& lora = {});

// The input half of it, for a split backward (ZB-H1's B): accumulates dinp (BT,in_local) only
// and writes the matmul's output gradient dy (BT,C), gathered over ranks under sequence
// parallelism, which the weight half needs: dweight += dy^T inp, dbias += sum of dy's rows.
// An adapter adds its input gradient too (lora_backward_input).
void row_parallel_exit_backward_input(const GptPass& pass, float* dinp, float* dy,
                                      const float* dres, const float* weight, int64_t in_local,
                                      const LoraSite& lora = {});

// Zeroes n floats of v (timed as a zero fill).
void zero_prefix(const GptPass& pass, std::vector<float>& v, int64_t n);

}  // namespace brigade
