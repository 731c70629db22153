#pragma once
// Per-op wall-time accounting for one rank's training step: which kernel kinds the step
// spends its time in. The set of ops is a fixed enum, so recording a call is an index into a
// fixed array of slots (two clock reads and two adds, no allocation, no lookup); ScopedOp
// with a null profiler costs one branch, so models can keep the hooks in their hot paths.
// Not thread-safe: one profiler per thread (per rank).
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace brigade {

// The kernel kinds of a training step. Forward and backward are separate ops because their
// costs differ (a linear layer's backward is two GEMMs). Model-level ops (kZeroFill: the
// model zeroing activation-gradient buffers before an accumulating backward kernel) and
// training-loop ops (kZeroGrads, kGradNorm, kOptimizer) are recorded by whoever calls them.
enum class Op : uint8_t {
  kEncoderForward,
  kEncoderBackward,
  kLayernormForward,
  kLayernormBackward,
  kMatmulForward,
  kMatmulBackward,
  kAttentionForward,
  kAttentionBackward,
  kGeluForward,
  kGeluBackward,
  kConv2dForward,
  kConv2dBackward,
  kMaxPoolForward,
  kMaxPoolBackward,
  kReluForward,
  kReluBackward,
  kResidualForward,
  kCrossentropyForward,
  kCrossentropyBackward,
  kZeroFill,
  kZeroGrads,
  kGradNorm,
  kOptimizer,
  kCount  // number of ops, not an op
};

inline constexpr int kNumOps = static_cast<int>(Op::kCount);

// Stable snake_case name of an op ("matmul_forward"), for tables and metrics.
std::string_view op_name(Op op);

// One row of OpProfiler::report().
struct OpRow {
  Op op;
  std::string_view name;
  int64_t calls;
  double total_ms;
  double share_pct;  // of the report's denominator
};

class OpProfiler {
 public:
  using Clock = std::chrono::steady_clock;

  // Adds one call of op lasting `elapsed`.
  void add(Op op, Clock::duration elapsed) {
    Slot& s = slots_[static_cast<int>(op)];
    s.ns += std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count();
    ++s.calls;
  }

  int64_t calls(Op op) const { return slots_[static_cast<int>(op)].calls; }
  double total_ms(Op op) const {
    return static_cast<double>(slots_[static_cast<int>(op)].ns) * 1e-6;
  }
  // Sum of total_ms over all ops.
  double total_ms() const;
  void reset() { slots_ = {}; }

  // The ops with at least one call, by total time, largest first (ties: enum order). Shares
  // are of wall_ms when it is > 0 (e.g. the measured step time), else of total_ms().
  std::vector<OpRow> report(double wall_ms = 0) const;

  // report(wall_ms) as an aligned text table: header, one line per op, then, when
  // wall_ms > 0, an "(untimed)" line for wall_ms - total_ms(), and a "total" line.
  std::string format_report(double wall_ms = 0) const;

 private:
  struct Slot {
    int64_t ns = 0;
    int64_t calls = 0;
  };
  std::array<Slot, kNumOps> slots_{};
};

// Times its scope as one call of op; does nothing when profiler is null.
class ScopedOp {
 public:
  ScopedOp(OpProfiler* profiler, Op op) : profiler_(profiler), op_(op) {
    if (profiler_) start_ = OpProfiler::Clock::now();
  }
  ~ScopedOp() {
    if (profiler_) profiler_->add(op_, OpProfiler::Clock::now() - start_);
  }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

 private:
  OpProfiler* profiler_;
  Op op_;
  OpProfiler::Clock::time_point start_{};
};

// Calls fn(args...) timed as one call of op: `timed(prof, Op::kGeluForward, gelu_forward, ...)`
// keeps each instrumented kernel call a single statement.
template <typename Fn, typename... Args>
inline void timed(OpProfiler* profiler, Op op, Fn&& fn, Args&&... args) {
  ScopedOp scope(profiler, op);
  fn(std::forward<Args>(args)...);
}

}  // namespace brigade
