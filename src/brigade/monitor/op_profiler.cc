#include "brigade/monitor/op_profiler.h"

#include <fmt/format.h>

#include <algorithm>

namespace brigade {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::kEncoderForward:
      return "encoder_forward";
    case Op::kEncoderBackward:
      return "encoder_backward";
    case Op::kLayernormForward:
      return "layernorm_forward";
    case Op::kLayernormBackward:
      return "layernorm_backward";
    case Op::kMatmulForward:
      return "matmul_forward";
    case Op::kMatmulBackward:
      return "matmul_backward";
    case Op::kAttentionForward:
      return "attention_forward";
    case Op::kAttentionBackward:
      return "attention_backward";
    case Op::kGeluForward:
      return "gelu_forward";
    case Op::kGeluBackward:
      return "gelu_backward";
    case Op::kConv2dForward:
      return "conv2d_forward";
    case Op::kConv2dBackward:
      return "conv2d_backward";
    case Op::kMaxPoolForward:
      return "maxpool_forward";
    case Op::kMaxPoolBackward:
      return "maxpool_backward";
    case Op::kReluForward:
      return "relu_forward";
    case Op::kReluBackward:
      return "relu_backward";
    case Op::kResidualForward:
      return "residual_forward";
      return "residual_backward";
    case Op::kCrossentropyForward:
      return "crossentropy_forward";
    case Op::kCrossentropyBackward:
      return "crossentropy_backward";
    case Op::kZeroFill:
      return "zero_fill";
    case Op::kZeroGrads:
      return "zero_grads";
    case Op::kGradNorm:
      return "grad_norm_clip";
    case Op::kOptimizer:
      return "optimizer_step";
    case Op::kCount:
      break;
  }
  return "unknown";
}

double OpProfiler::total_ms() const {
  int64_t ns = 0;
  for (const Slot& s : slots_) ns += s.ns;
  return static_cast<double>(ns) * 1e-6;
}

std::vector<OpRow> OpProfiler::report(double wall_ms) const {
  const double total = wall_ms > 0 ? wall_ms : total_ms();
  std::vector<OpRow> rows;
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    if (slots_[i].calls == 0) continue;
    const double ms = total_ms(op);
    rows.push_back({.op = op,
                    .name = op_name(op),
                    .calls = slots_[i].calls,
                    .total_ms = ms,
                    .share_pct = total > 0 ? 100.0 * ms / total : 0.0});
  }
  // Stable: equal times keep enum order, so the table is deterministic.
  std::stable_sort(rows.begin(), rows.end(),
                   [](const OpRow& a, const OpRow& b) { return a.total_ms > b.total_ms; });
  return rows;
}

std::string OpProfiler::format_report(double wall_ms) const {
  auto line = [](std::string_view name, std::string calls, double ms, double pct) {
    return fmt::format("{:<24}{:>10}{:>14.1f}{:>9.1f}%\n", name, calls, ms, pct);
  };
  std::string out = fmt::format("{:<24}{:>10}{:>14}{:>10}\n", "op", "calls", "total ms", "share");
  for (const OpRow& r : report(wall_ms))
    out += line(r.name, std::to_string(r.calls), r.total_ms, r.share_pct);
  const double timed = total_ms();
  if (wall_ms > 0) {
    // What the step spends outside the profiled ops (data loading, loss sum, loop overhead).
    out += line("(untimed)", "", wall_ms - timed, 100.0 * (wall_ms - timed) / wall_ms);
    out += line("total", "", wall_ms, 100.0);
  } else {
    out += line("total", "", timed, 100.0);
  }
  return out;
}

}  // namespace brigade
