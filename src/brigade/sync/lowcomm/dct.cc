// Block DCT. The separable transform is two small matrix products per block, written so the
// innermost loop runs over contiguous rows (axpy form) and vectorises:
//   forward: Y = X T2 (row i of Y += X[i][j] * row j of T2), then C = T1^T Y
//            (row b1 of C += T1[i][b1] * row i of Y);
//   inverse: Y = T1 C, then X = Y T2^T (row i of X += Y[i][b2] * row b2 of T2^T).
#include "brigade/sync/lowcomm/dct.h"

#include <cblas.h>

#include <array>
#include <climits>
#include <cmath>
#include <cstring>

#include "brigade/base/check.h"
#include "brigade/sync/lowcomm/common.h"

namespace brigade {

namespace {

struct BasisTable {
  std::array<std::vector<float>, kMaxDctSize + 1> t, tt;
  std::array<DctBasis, kMaxDctSize + 1> basis;
  BasisTable() {
    for (int s = 1; s <= kMaxDctSize; ++s) {
      t[s].resize(s * s);
      tt[s].resize(s * s);
      for (int j = 0; j < s; ++j) {
        for (int b = 0; b < s; ++b) {
          const double c = b == 0 ? std::sqrt(1.0 / s) : std::sqrt(2.0 / s);
          const double v = c * std::cos(M_PI * (2.0 * j + 1.0) * b / (2.0 * s));
          t[s][j * s + b] = static_cast<float>(v);
          tt[s][b * s + j] = static_cast<float>(v);
        }
      }
      basis[s] = DctBasis{s, t[s].data(), tt[s].data()};
    }
  }
};

// y[0, n) += a * x[0, n)
inline void axpy(float* __restrict y, float a, const float* __restrict x, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

const DctBasis& dct_basis(int s) {
  BRIGADE_CHECK(s >= 1 && s <= kMaxDctSize) << "DCT size " << s;
  static const BasisTable table;
  return table.basis[s];
}

int64_t dct_chunk_size(int64_t n, int64_t max_chunk) {
  BRIGADE_CHECK(n >= 1 && max_chunk >= 1) << "n " << n << " max_chunk " << max_chunk;
  for (int64_t s = std::min(n, max_chunk); s > 1; --s) {
    if (n % s == 0) return s;
  }
  return 1;
}

ChunkGeometry dct_geometry(const std::vector<int64_t>& shape, int max_chunk) {
  BRIGADE_CHECK(max_chunk >= 1 && max_chunk <= kMaxDctSize) << "max_chunk " << max_chunk;
  const MatrixShape m = as_matrix(shape);
  ChunkGeometry g;
  g.n1 = m.rows;
  g.n2 = m.cols;
  g.s1 = static_cast<int>(dct_chunk_size(m.rows, max_chunk));
  g.s2 = static_cast<int>(dct_chunk_size(m.cols, max_chunk));
  return g;
}

BlockDct::BlockDct(const ChunkGeometry& geometry)
    : g_(geometry),
      b1_(&dct_basis(geometry.s1)),
      b2_(&dct_basis(geometry.s2)),
      scratch_(static_cast<size_t>(geometry.s1) * geometry.s2) {
  BRIGADE_CHECK(g_.n1 % g_.s1 == 0 && g_.n2 % g_.s2 == 0)
      << "blocks " << g_.s1 << "x" << g_.s2 << " do not tile " << g_.n1 << "x" << g_.n2;
}

void BlockDct::forward_block(const float* x, int64_t ld, float* coeffs) {
  const int s1 = g_.s1, s2 = g_.s2;
  float* y = scratch_.data();
  std::memset(y, 0, sizeof(float) * s1 * s2);
  for (int i = 0; i < s1; ++i) {
    for (int j = 0; j < s2; ++j) axpy(y + i * s2, x[i * ld + j], b2_->t + j * s2, s2);
  }
  std::memset(coeffs, 0, sizeof(float) * s1 * s2);
  for (int b = 0; b < s1; ++b) {
    for (int i = 0; i < s1; ++i) axpy(coeffs + b * s2, b1_->t[i * s1 + b], y + i * s2, s2);
  }
}

void BlockDct::inverse_block(const float* coeffs, float* x, int64_t ld) {
  const int s1 = g_.s1, s2 = g_.s2;
  float* y = scratch_.data();
  std::memset(y, 0, sizeof(float) * s1 * s2);
  for (int i = 0; i < s1; ++i) {
    for (int b = 0; b < s1; ++b) axpy(y + i * s2, b1_->t[i * s1 + b], coeffs + b * s2, s2);
  }
  for (int i = 0; i < s1; ++i) {
    float* row = x + i * ld;
    std::memset(row, 0, sizeof(float) * s2);
    for (int b = 0; b < s2; ++b) axpy(row, y[i * s2 + b], b2_->tt + b * s2, s2);
  }
}

void BlockDct::add_inverse_sparse(const uint32_t* idx, const float* val, int64_t k, float alpha,
                                  float* x, int64_t ld) const {
  const int s1 = g_.s1, s2 = g_.s2;
  for (int64_t e = 0; e < k; ++e) {
    const int b1 = static_cast<int>(idx[e] / s2), b2 = static_cast<int>(idx[e] % s2);
    const float a = alpha * val[e];
    const float* col1 = b1_->tt + b1 * s1;  // T1[., b1]
    const float* col2 = b2_->tt + b2 * s2;  // T2[., b2]
    for (int i = 0; i < s1; ++i) axpy(x + i * ld, a * col1[i], col2, s2);
  }
}

// A strip of s1 rows is contiguous, so as a matrix of (s1 n2 / s2) rows of s2 it is every
// block row of every block stacked: one sgemm applies T2 to all of them. The result, read
// again as (s1, n2), gets T1^T from the left in a second sgemm.
void BlockDct::forward_rows(const float* rows, float* out, float* work) const {
  const int s1 = g_.s1, s2 = g_.s2;
  const int64_t n2 = g_.n2;
  BRIGADE_CHECK(s1 * n2 / s2 <= INT32_MAX && n2 <= INT32_MAX) << "strip too large for BLAS";
  float* y = s1 == 1 ? out : work;
  if (s2 == 1) {
    std::memcpy(y, rows, sizeof(float) * s1 * n2);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(s1 * n2 / s2), s2, s2,
                1.0f, rows, s2, b2_->t, s2, 0.0f, y, s2);
  }
  if (s1 > 1) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s1, static_cast<int>(n2), s1, 1.0f, b1_->t,
                s1, y, static_cast<int>(n2), 0.0f, out, static_cast<int>(n2));
  }
}

void BlockDct::forward(const float* x, float* coeffs) {
  const int64_t cs = g_.chunk_size();
  for (int64_t c = 0; c < g_.num_chunks(); ++c) {
    forward_block(x + g_.block_offset(c), g_.n2, coeffs + c * cs);
  }
}

void BlockDct::inverse(const float* coeffs, float* x) {
  const int64_t cs = g_.chunk_size();
  for (int64_t c = 0; c < g_.num_chunks(); ++c) {
    inverse_block(coeffs + c * cs, x + g_.block_offset(c), g_.n2);
  }
}

}  // namespace brigade
