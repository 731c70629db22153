#pragma once
// Top-k by magnitude, the selection step of DeMo (per DCT chunk) and of top-k sparsification
// (per flat range).
#include <cstdint>

namespace brigade {

// Selects the k entries of x[0, n) with the largest |x|: ties go to the lower index, and NaN
// counts as larger than any number (so a NaN is sent, not hidden). Writes their indices in
// ascending order to idx[0, k) and the values at them to val[0, k). scratch holds n floats.
// Requires 0 <= k <= n < 2^32. O(n), no allocation.
void topk_abs(const float* x, int64_t n, int64_t k, float* scratch, uint32_t* idx, float* val);

}  // namespace brigade
