// The adapter's products go to gemm() directly (kernels/cpu/gemm_backend.h): its beta = 1 adds
// the low-rank term into the base layer's output and input gradient in place, with no
// (N, out) temporary, and alpha carries the scale s.
#include "brigade/model/lora.h"

#include <algorithm>

#include "brigade/base/error.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/model/tp/tp_comm.h"

namespace brigade {

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = {"attn.c_attn", "attn.c_proj", "mlp.c_fc",
                                                 "mlp.c_proj"};
  return names;
}

unsigned parse_lora_targets(const std::vector<std::string>& names) {
  const std::vector<std::string>& allowed = lora_target_names();
  std::string list;
  for (const std::string& a : allowed) list += (list.empty() ? "\"" : ", \"") + a + "\"";
  unsigned bits = 0;
  for (const std::string& n : names) {
    const auto it = std::find(allowed.begin(), allowed.end(), n);
    if (it == allowed.end())
      throw ConfigError("lora.targets = \"" + n + "\": not a layer an adapter can target; " +
                        "allowed values are " + list);
    const unsigned bit = 1u << static_cast<unsigned>(it - allowed.begin());
    if (bits & bit) throw ConfigError("lora.targets: \"" + n + "\" is listed twice");
    bits |= bit;
  }
  return bits;
}

bool is_lora_tensor(const std::string& name) {
  const auto ends_with = [&](const std::string& tail) {
    return name.size() > tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends_with(".lora_A.weight") || ends_with(".lora_B.weight");
}

std::vector<std::string> lora_base_freeze_patterns() {
  // Whole names, not module patterns: "h.*.attn.c_attn" would also name its adapters.
  return {"wte",
          "wpe",
          "ln_f",
          "h.*.ln_1",
          "h.*.ln_2",
          "*.bias",
          "h.*.attn.c_attn.weight",
          "h.*.attn.c_proj.weight",
          "h.*.mlp.c_fc.weight",
          "h.*.mlp.c_proj.weight"};
}

void lora_forward(float* y, const float* x, const LoraSite& site, int64_t N, int64_t in,
                  int64_t out) {
  const int64_t r = site.rank;
  gemm(false, true, N, r, in, 1.0f, x, in, site.a, in, 0.0f, site.u, r);         // u = x A^T
  gemm(false, true, N, out, r, site.scale, site.u, r, site.b, r, 1.0f, y, out);  // y += s u B^T
}

void lora_backward(float* dx, const float* dy, const float* x, const LoraSite& site, int64_t N,
                   int64_t in, int64_t out) {
  lora_backward_weight(dy, x, site, N, in, out);
  // dx (N, in) += du A, du as the weight half left it
  if (dx) gemm(false, false, N, in, site.rank, 1.0f, site.du, site.rank, site.a, in, 1.0f, dx, in);
}

void lora_backward_input(float* dx, const float* dy, const LoraSite& site, int64_t N, int64_t in,
                         int64_t out) {
  const int64_t r = site.rank;
  // du (N, r) = s dy B, then dx (N, in) += du A: the same products as lora_backward's
  gemm(false, false, N, r, out, site.scale, dy, out, site.b, r, 0.0f, site.du, r);
  gemm(false, false, N, in, r, 1.0f, site.du, r, site.a, in, 1.0f, dx, in);
}

void lora_backward_weight(const float* dy, const float* x, const LoraSite& site, int64_t N,
                          int64_t in, int64_t out) {
  const int64_t r = site.rank;
  gemm(false, true, N, r, in, 1.0f, x, in, site.a, in, 0.0f, site.u, r);  // u = x A^T again
  const bool tp = site.tp && site.tp->active();
  if (tp && site.row_parallel) all_reduce_sum(*site.tp, site.u, N * r);  // over A's columns
  // dB (out, r) += s dy^T u
  gemm(true, false, out, r, N, site.scale, dy, out, site.u, r, 1.0f, site.db, r);
  // du (N, r) = s dy B
  gemm(false, false, N, r, out, site.scale, dy, out, site.b, r, 0.0f, site.du, r);
  // dA (r, in) += du^T x; du is this rank's part of the sum over B's rows when they are split
  if (tp && !site.row_parallel) {
    gemm(true, false, r, in, N, 1.0f, site.du, r, x, in, 0.0f, site.part, in);
    all_reduce_sum(*site.tp, site.part, r * in);
    for (int64_t i = 0; i < r * in; ++i) site.da[i] += site.part[i];
  } else {
    gemm(true, false, r, in, N, 1.0f, site.du, r, x, in, 1.0f, site.da, in);
  }
}

}  // namespace brigade
