#pragma once
// LoRA (Hu et al. 2021): a frozen linear layer y = x W^T + b gains a trainable low-rank update,
//   y = x W^T + b + s * (x A^T) B^T,   s = alpha / r,
// with A (r, in) and B (out, r). B starts at zero, so the adapted model starts as the base model
// exactly; A starts as PEFT's (Kaiming-uniform with a = sqrt(5): U(-1/sqrt(in), 1/sqrt(in))).
// The adapters are ordinary tensors of the GPT layout, named after the layer they adapt, as
// PEFT names them: h.{l}.attn.c_attn.lora_A.weight (r, C), h.{l}.attn.c_attn.lora_B.weight
// (3C, r). Every other parameter is frozen (train.freeze's mechanism, lora_base_freeze_patterns).
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/model/tp/tp_context.h"

namespace brigade {

// The linear layers of a dense GPT block an adapter may target (bits of GptConfig::lora_targets).
inline constexpr unsigned kLoraAttn = 1u << 0;      // attn.c_attn (C -> 3C)
inline constexpr unsigned kLoraAttnProj = 1u << 1;  // attn.c_proj (C -> C)
inline constexpr unsigned kLoraFc = 1u << 2;        // mlp.c_fc (C -> 4C)
inline constexpr unsigned kLoraFcProj = 1u << 3;    // mlp.c_proj (4C -> C)

// Whether the layer of a target bit is row-parallel under tensor parallelism (the c_projs: their
// input is split); the others are column-parallel (their output is split).
inline bool lora_row_parallel(unsigned target_bit) {
  return target_bit == kLoraAttnProj || target_bit == kLoraFcProj;
}

// "attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj": the lora.targets values, in the
// block's forward order.
const std::vector<std::string>& lora_target_names();

// The bits of names. Throws ConfigError naming lora.targets, the value and the allowed values
// for an unknown or repeated name.
unsigned parse_lora_targets(const std::vector<std::string>& names);

// Whether `name` is an adapter tensor ("....lora_A.weight" or "....lora_B.weight").
bool is_lora_tensor(const std::string& name);

// train.freeze patterns naming every tensor of a dense GPT except the adapters.
std::vector<std::string> lora_base_freeze_patterns();

// Offsets of one adapted layer's A and B in the flat buffer; -1 when the layer has none.
struct LoraParams {
  int64_t a = -1, b = -1;
  bool row_parallel = false;  // the layer is row-parallel under tp (attn.c_proj, mlp.c_proj)
  bool on() const { return a >= 0; }
};

// One adapted layer during a pass: A (r, in), B (out, r) and their gradients (null in forward),
// u (N, r) and du (N, r) scratch, s = alpha / r. a == nullptr: the layer has no adapter.
struct LoraSite {
  const float* a = nullptr;
  const float* b = nullptr;
  float* da = nullptr;
  float* db = nullptr;
  float* u = nullptr;
  float* du = nullptr;
  int64_t rank = 0;
  float scale = 0.0f;
  // Tensor parallelism (null or inactive: none). A column-parallel layer holds all of A and its
  // rows of B: each rank's dA is a partial sum, all-reduced through part (r, in) scratch. A
  // row-parallel layer holds its columns of A and all of B: x A^T is a partial sum, added into the
  // layer's own partial output in forward (its all-reduce sums both) and all-reduced in backward
  // (r floats per row) before dB and dx use it.
  const TpContext* tp = nullptr;
  bool row_parallel = false;
  float* part = nullptr;
  bool on() const { return a != nullptr; }
};

// y (N, out) += s * (x A^T) B^T; x is (N, in). Uses site.u.
void lora_forward(float* y, const float* x, const LoraSite& site, int64_t N, int64_t in,
                  int64_t out);

// Backward of it, given dy (N, out): dx (N, in) += s * (dy B) A (skipped when dx is null),
// dA += s * (dy B)^T x, dB += dy^T (s * x A^T). Recomputes u from x (r is small: cheaper than
// keeping it per block and micro-batch).
void lora_backward(float* dx, const float* dy, const float* x, const LoraSite& site, int64_t N,
                   int64_t in, int64_t out);

// The two halves of lora_backward for a split backward (ZB-H1's B and W), bitwise the fused
// one's results: input, dx += s (dy B) A (no collective); weight, dA and dB (with the tensor-
// parallel sums of lora_backward). Together they compute du = s dy B twice.
void lora_backward_input(float* dx, const float* dy, const LoraSite& site, int64_t N, int64_t in,
                         int64_t out);
void lora_backward_weight(const float* dy, const float* x, const LoraSite& site, int64_t N,
                          int64_t in, int64_t out);

}  // namespace brigade
