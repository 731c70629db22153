#pragma once
// PowerSGD (Vogels et al. 2019): rank-r gradient compression with error feedback and a
// warm-started power iteration. Per matrix M (a tensor viewed as n x m, common.h: as_matrix):
//   M = g + e                                       (error feedback)
//   P = M Q                  all_reduce mean P      (Q: m x r, warm-started, same on all replicas)
//   P = orthonormalise(P)    (Gram-Schmidt on the r columns)
//   Q = M^T P                all_reduce mean Q      (becomes next step's warm start)
//   M_hat = P Q^T;  e = M - M_hat;  the gradient becomes M_hat
// Because P and Q are linear in M, M_hat is the rank-r approximation P P^T mean(M) of the mean
// of the replicas' M. Tensors of one row (1-D) and, unless configured otherwise, matrices where
// (n + m) r >= n m are sent uncompressed (exact mean, no error).
//
// Wire: two all_reduces per step (f32, or bf16 with config.wire), of p_floats() = sum (n r) +
// uncompressed numel and q_floats() = sum (m r) values (bytes_per_step() gives the Gloo ring
// traffic of both).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/optim/optimizer.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

struct PowerSgdConfig {
  int rank = 4;       // r, >= 1 (capped per matrix at min(n, m))
  uint64_t seed = 0;  // initial Q: N(0, 1) from (seed, tensor name), same on every replica
  bool skip_incompressible = true;   // send matrices with (n + m) r >= n m as they are
  WireDtype wire = WireDtype::kF32;  // of the two all-reduces (bf16 halves the bytes)
  // Throws ConfigError naming the key ("powersgd.rank"), the value and what is allowed.
  void validate() const;
};

class PowerSgd {
 public:
  // State for [begin, end) of layout, which must consist of whole tensors (ConfigError).
  PowerSgd(const PowerSgdConfig& config, const ParamLayout& layout, int64_t begin, int64_t end);

  // Collective. grads[begin, end) (indexed by flat offset) becomes the PowerSGD estimate of the
  // mean over replicas of (grads + error); the error is updated.
  void reduce(float* grads, Communicator& comm);

  // The local phases of reduce(), for tests and other transports. Between them the caller
  // replaces p (then q) with its mean over the replicas:
  //   phase_p: M = grads + e; p = [P = M Q for each matrix, then the uncompressed tensors]
  //   phase_q: orthonormalise the P's in p; q = [Q = M^T P for each matrix]
  //   phase_finish: grads = M_hat (or the mean p for uncompressed tensors); e = M - M_hat;
  //                 q becomes the warm start.
  void phase_p(const float* grads, float* p);
  void phase_q(float* p, float* q);
  void phase_finish(const float* p, const float* q, float* grads);

  int64_t p_floats() const { return p_floats_; }
  int64_t q_floats() const { return q_floats_; }
  // Bytes this rank sends and receives in one reduce(): two f32 ring all_reduces.
  Traffic bytes_per_step(int world, int rank) const;

  // The whole state, for checkpoints: "powersgd.error" over [begin, end) (zero on uncompressed
  // tensors), the warm-start Q's (q_floats() values, matrices in layout order, each m x r
  // row-major), and the number of finished steps (it keys the redraw of dead Q columns).
  std::vector<StateView> state_tensors();
  std::span<float> q_state() { return q_; }
  std::span<const float> q_state() const { return q_; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  int compressed_matrices() const { return static_cast<int>(matrices_.size()); }

 private:
  struct Matrix {
    int64_t offset;  // flat
    int64_t n, m;
    int r;
    int64_t p_off, q_off;
    uint64_t key;  // RNG stream of its Q
  };
  struct Plain {
    int64_t offset, numel, p_off;
  };
  void reseed_dead_columns(const Matrix& mat);

  PowerSgdConfig config_;
  int64_t begin_, end_;
  std::vector<Matrix> matrices_;
  std::vector<Plain> plain_;
  int64_t p_floats_ = 0, q_floats_ = 0;
  int64_t steps_ = 0;
  std::vector<float> error_;  // holds M between phase_p and phase_finish
  std::vector<float> q_, p_buf_, q_buf_;
};

// Orthonormalises the r columns of P (n x r, row-major) in place by Gram-Schmidt with
// re-orthogonalisation. A column whose norm after projection is below 1e-5 of its norm before
// (dependent on the earlier ones, up to f32 rounding) or zero becomes zero instead of
// amplified rounding noise.
void orthonormalize_columns(float* p, int64_t n, int r);

}  // namespace brigade
