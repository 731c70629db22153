#pragma once
// Orthonormal DCT-II on small blocks: DeMo/DisTrO move a tensor's residual into this basis,
// where a few coefficients per block carry most of the energy, and send only those.
//
// Basis of size s (1..64): T[j][b] = c_b cos(pi (2j+1) b / 2s), c_0 = sqrt(1/s),
// c_b = sqrt(2/s) for b > 0. T is orthogonal (T T^T = I), so the forward transform C = T^T x
// (DCT-II) and the inverse x = T C (DCT-III) undo each other exactly and keep the L2 norm.
//
// Chunking (DeMo's rule): along a dimension of length n the chunk is the largest divisor of n
// that is <= 64, so chunks tile the tensor exactly (a prime n > 64 gets chunk 1). A tensor is
// viewed as a matrix (n1, n2) (common.h: as_matrix; a 1-D tensor is (1, n), so its chunks are
// rows of length s) and cut into (n1/s1) x (n2/s2) blocks of s1 x s2 -- the view
// (n1/s1, s1, n2/s2, s2). Each block gets the separable 2-D transform C = T_s1^T X T_s2;
// coefficient (b1, b2) of a block is entry b1 * s2 + b2 of its chunk, and chunks are numbered
// row-major over the block grid.
#include <cstdint>
#include <vector>

namespace brigade {

inline constexpr int kMaxDctSize = 64;

// The basis of size s in [1, kMaxDctSize]: t[j * s + b] = T[j][b], tt[b * s + j] = T[j][b].
// Computed once per process (double precision, rounded to f32) and shared.
struct DctBasis {
  int size = 0;
  const float* t = nullptr;
  const float* tt = nullptr;
};
const DctBasis& dct_basis(int s);

// Largest divisor of n (>= 1) that is <= max_chunk (>= 1).
int64_t dct_chunk_size(int64_t n, int64_t max_chunk = kMaxDctSize);

// How one tensor is cut into DCT chunks.
struct ChunkGeometry {
  int64_t n1 = 1, n2 = 1;  // the tensor as a matrix
  int s1 = 1, s2 = 1;      // block size (chunk = s1 * s2 coefficients)
  int64_t num_chunks() const { return (n1 / s1) * (n2 / s2); }
  int chunk_size() const { return s1 * s2; }
  // Offset in the (n1, n2) row-major tensor of the top-left element of block `chunk`.
  int64_t block_offset(int64_t chunk) const {
    const int64_t blocks2 = n2 / s2;
    return (chunk / blocks2) * s1 * n2 + (chunk % blocks2) * s2;
  }
};
// DeMo's rule for a tensor of this shape, with chunk sizes capped at max_chunk (1..64).
ChunkGeometry dct_geometry(const std::vector<int64_t>& shape, int max_chunk = kMaxDctSize);

// The 2-D transform of the blocks of one geometry. Holds its scratch (s1 * s2 floats), so no
// call allocates; not thread-safe (one per thread).
class BlockDct {
 public:
  explicit BlockDct(const ChunkGeometry& geometry);

  const ChunkGeometry& geometry() const { return g_; }

  // coeffs (s1 * s2) = T1^T X T2 for the s1 x s2 block X at x with row stride ld.
  void forward_block(const float* x, int64_t ld, float* coeffs);
  // The block at x (row stride ld) becomes T1 C T2^T for C = coeffs (s1 * s2).
  void inverse_block(const float* coeffs, float* x, int64_t ld);
  // Block at x += alpha * T1 C T2^T for the sparse C with entries (idx[i], val[i]), i < k.
  // Costs k * s1 * s2, cheaper than inverse_block's (s1 + s2) s1 s2 when k < s1 + s2.
  void add_inverse_sparse(const uint32_t* idx, const float* val, int64_t k, float alpha, float* x,
                          int64_t ld) const;

  // Forward transform of every block in one strip of s1 whole rows (rows points at the first;
  // the strip is contiguous) with two sgemm calls -- much faster than block by block. out
  // (s1 x n2) gets the strip's layout: coefficient (b1, b2) of block jb at b1 * n2 + jb * s2 +
  // b2. work holds s1 * n2 floats.
  void forward_rows(const float* rows, float* out, float* work) const;

  // Whole tensors: x is (n1, n2) row-major, coeffs is (num_chunks, chunk_size).
  void forward(const float* x, float* coeffs);
  void inverse(const float* coeffs, float* x);

 private:
  ChunkGeometry g_;
  const DctBasis* b1_;
  const DctBasis* b2_;
  std::vector<float> scratch_;
};

}  // namespace brigade
