// GELU, tanh approximation, as in GPT-2 and llm.c. The derivative uses sech^2 = 1 - tanh^2,
// which stays finite where cosh would overflow. tanh comes from the four-wide fast_exp in
// vec.h (absolute error ~2e-7): libm's tanhf per element would cost as much as the matmuls
// around the GELU. A backend may compute it instead (train.kernels = "onednn": oneDNN's
// eltwise_gelu_tanh, pointwise_onednn.cc, measured faster); this is the kernel otherwise.
#include "brigade/kernels/cpu/gelu.h"

#include <cstring>

#include "brigade/kernels/cpu/backend_registry.h"
#include "brigade/kernels/cpu/vec.h"

namespace brigade {

namespace {

using detail::v4f;

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCube = 0.044715f;

inline v4f gelu4(v4f x) {
  const v4f u = kGeluScale * (x + kGeluCube * x * x * x);
  return 0.5f * x * (1.0f + detail::tanh4(u));
}

inline v4f gelu_grad4(v4f x) {
  const v4f u = kGeluScale * (x + kGeluCube * x * x * x);
  const v4f th = detail::tanh4(u);
  const v4f sech2 = 1.0f - th * th;
  const v4f du = kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
  return 0.5f * (1.0f + th) + 0.5f * x * sech2 * du;
}

// Copies the last n % 4 elements of a into a zero-padded group of four.
inline v4f load_tail(const float* a, int64_t count) {
  float tmp[4] = {};
  std::memcpy(tmp, a, static_cast<size_t>(count) * sizeof(float));
  return detail::load4(tmp);
}

inline void store_tail(float* a, v4f v, int64_t count) {
  std::memcpy(a, &v, static_cast<size_t>(count) * sizeof(float));
}

}  // namespace

void gelu_forward(float* out, const float* inp, int64_t N) {
  if (N <= 0) return;
  if (const auto backend = detail::selected_backend_ops().gelu_forward) return backend(out, inp, N);
  int64_t i = 0;
  // Each group is read before it is written, so out may alias inp.
  for (; i + 4 <= N; i += 4) detail::store4(out + i, gelu4(detail::load4(inp + i)));
  if (i < N) store_tail(out + i, gelu4(load_tail(inp + i, N - i)), N - i);
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) {
  if (N <= 0) return;
  if (const auto backend = detail::selected_backend_ops().gelu_backward) {
    return backend(dinp, inp, dout, N);
  }
  int64_t i = 0;
  for (; i + 4 <= N; i += 4) {
    const v4f g = gelu_grad4(detail::load4(inp + i)) * detail::load4(dout + i);
    detail::store4(dinp + i, detail::load4(dinp + i) + g);
  }
  if (i < N) {
    const int64_t n = N - i;
    const v4f g = gelu_grad4(load_tail(inp + i, n)) * load_tail(dout + i, n);
    store_tail(dinp + i, load_tail(dinp + i, n) + g, n);
  }
}

}  // namespace brigade
