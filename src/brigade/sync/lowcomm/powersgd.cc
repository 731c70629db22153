#include "brigade/sync/lowcomm/powersgd.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/tensor/rng.h"

namespace brigade {

namespace {
int blas_int(int64_t v) {
  BRIGADE_CHECK(v >= 0 && v <= INT_MAX) << "BLAS dimension " << v;
  return static_cast<int>(v);
}
}  // namespace

void PowerSgdConfig::validate() const {
  if (rank < 1) throw ConfigError("powersgd.rank = " + std::to_string(rank) + ": must be >= 1");
}

void orthonormalize_columns(float* p, int64_t n, int r) {
  for (int i = 0; i < r; ++i) {
    double before = 0.0;
    for (int64_t k = 0; k < n; ++k) before += double{p[k * r + i]} * p[k * r + i];
    // Two projection passes ("twice is enough"): one pass in f32 leaves the column
    // non-orthogonal to earlier ones by the rounding of the first, which matters exactly when
    // the column is nearly dependent.
    for (int pass = 0; pass < 2; ++pass) {
      for (int j = 0; j < i; ++j) {
        double dot = 0.0;
        for (int64_t k = 0; k < n; ++k) dot += double{p[k * r + j]} * p[k * r + i];
        const float d = static_cast<float>(dot);
        for (int64_t k = 0; k < n; ++k) p[k * r + i] -= d * p[k * r + j];
      }
    }
    double after = 0.0;
    for (int64_t k = 0; k < n; ++k) after += double{p[k * r + i]} * p[k * r + i];
    const double norm = std::sqrt(after);
    const bool dead = !(norm > 0.0) || norm <= 1e-5 * std::sqrt(before) || !std::isfinite(norm);
    const float scale = dead ? 0.0f : static_cast<float>(1.0 / norm);
    for (int64_t k = 0; k < n; ++k) p[k * r + i] *= scale;
  }
}

PowerSgd::PowerSgd(const PowerSgdConfig& config, const ParamLayout& layout, int64_t begin,
                   int64_t end)
    : config_(config), begin_(begin), end_(end) {
  config_.validate();
  for (const ParamSpec* s : whole_tensors_in_range(layout, begin, end, "powersgd")) {
    const MatrixShape ms = as_matrix(s->shape);
    const int r = static_cast<int>(std::min<int64_t>({config_.rank, ms.rows, ms.cols}));
    const bool incompressible = (ms.rows + ms.cols) * r >= ms.rows * ms.cols;
    if (ms.rows == 1 || ms.cols == 1 || (config_.skip_incompressible && incompressible)) {
      plain_.push_back(Plain{s->offset, s->numel, 0});
      continue;
    }
    matrices_.push_back(Matrix{s->offset, ms.rows, ms.cols, r, p_floats_, q_floats_,
                               mix_keys(hash_name(s->name), 0x9053c0ffeeull)});
    p_floats_ += ms.rows * r;
    q_floats_ += ms.cols * r;
  }
  for (Plain& pl : plain_) {
    pl.p_off = p_floats_;
    p_floats_ += pl.numel;
  }
  error_.assign(static_cast<size_t>(end - begin), 0.0f);
  q_.assign(q_floats_, 0.0f);
  for (const Matrix& mat : matrices_) {
    fill_normal(q_.data() + mat.q_off, mat.m * mat.r, 0.0f, 1.0f, config_.seed, mat.key);
  }
  p_buf_.assign(p_floats_, 0.0f);
  q_buf_.assign(q_floats_, 0.0f);
}

// A Q column that is all zero (its P column was dead, e.g. a zero gradient) would stay zero
// forever under warm starting; it is redrawn from the RNG at a step-dependent index, which is
// the same decision and the same values on every replica (Q is identical everywhere).
void PowerSgd::reseed_dead_columns(const Matrix& mat) {
  float* q = q_.data() + mat.q_off;
  for (int c = 0; c < mat.r; ++c) {
    bool zero = true;
    for (int64_t k = 0; k < mat.m && zero; ++k) zero = q[k * mat.r + c] == 0.0f;
    if (!zero) continue;
    for (int64_t k = 0; k < mat.m; ++k) {
      q[k * mat.r + c] = random_uniform(config_.seed, mat.key,
                                        static_cast<uint64_t>(steps_ + 1) * mat.m * mat.r +
                                            static_cast<uint64_t>(k * mat.r + c)) -
                         0.5f;
    }
  }
}

void PowerSgd::phase_p(const float* grads, float* p) {
  for (const Matrix& mat : matrices_) {
    float* M = error_.data() + (mat.offset - begin_);
    const float* g = grads + mat.offset;
    for (int64_t i = 0; i < mat.n * mat.m; ++i) M[i] += g[i];
    reseed_dead_columns(mat);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(mat.n), mat.r, blas_int(mat.m),
                1.0f, M, blas_int(mat.m), q_.data() + mat.q_off, mat.r, 0.0f, p + mat.p_off, mat.r);
  }
  for (const Plain& pl : plain_) {
    std::memcpy(p + pl.p_off, grads + pl.offset, sizeof(float) * pl.numel);
  }
}

void PowerSgd::phase_q(float* p, float* q) {
  for (const Matrix& mat : matrices_) {
    float* P = p + mat.p_off;
    orthonormalize_columns(P, mat.n, mat.r);
    const float* M = error_.data() + (mat.offset - begin_);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, blas_int(mat.m), mat.r, blas_int(mat.n),
                1.0f, M, blas_int(mat.m), P, mat.r, 0.0f, q + mat.q_off, mat.r);
  }
}

void PowerSgd::phase_finish(const float* p, const float* q, float* grads) {
  for (const Matrix& mat : matrices_) {
    float* out = grads + mat.offset;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(mat.n), blas_int(mat.m), mat.r,
                1.0f, p + mat.p_off, mat.r, q + mat.q_off, mat.r, 0.0f, out, blas_int(mat.m));
    float* e = error_.data() + (mat.offset - begin_);
    for (int64_t i = 0; i < mat.n * mat.m; ++i) e[i] -= out[i];
  }
  for (const Plain& pl : plain_) {
    std::memcpy(grads + pl.offset, p + pl.p_off, sizeof(float) * pl.numel);
  }
  if (q != q_.data()) std::memcpy(q_.data(), q, sizeof(float) * q_floats_);
  ++steps_;
}

void PowerSgd::reduce(float* grads, Communicator& comm) {
  phase_p(grads, p_buf_.data());
  if (p_floats_ > 0) comm.all_reduce(p_buf_.data(), p_floats_, ReduceOp::kAvg, config_.wire);
  phase_q(p_buf_.data(), q_buf_.data());
  if (q_floats_ > 0) comm.all_reduce(q_buf_.data(), q_floats_, ReduceOp::kAvg, config_.wire);
  phase_finish(p_buf_.data(), q_buf_.data(), grads);
}

Traffic PowerSgd::bytes_per_step(int world, int rank) const {
  return all_reduce_traffic(p_floats_, config_.wire, world, rank) +
         all_reduce_traffic(q_floats_, config_.wire, world, rank);
}

std::vector<StateView> PowerSgd::state_tensors() {
  return {{"powersgd.error", error_.data(), begin_, end_}};
}

}  // namespace brigade
