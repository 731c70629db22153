// The oneDNN backend of gemm(): dnnl::matmul, f32, and bf16:bf16:f32 for train.precision = "bf16"
// (the operand type is part of every key below, so the two precisions never share a primitive).
//
// oneDNN compiles a primitive for one exact problem (dimensions, strides, attributes), which
// takes from tens of microseconds to milliseconds, so a primitive is made once and kept, in a
// small map per thread. Two kinds of entry:
//
//   * Regular shapes (M, N and K all multiples of kStaticGrain: every linear layer of the usual
//     model sizes, the full 64 x 64 attention tiles) get a primitive compiled for exactly that
//     shape, keyed by (M, N, K, transposes, leading dimensions, alpha, beta, thread count), with
//     three memory objects that have no data of their own and the primitive's scratchpad
//     (user-managed, allocated with the entry). A call looks the entry up, points the memory
//     objects at the caller's buffers and executes through the C API with its arguments on the
//     stack: brigade allocates nothing.
//   * Other shapes are the ones that vary from call to call: a mixture-of-experts expert's rows
//     (the tokens routed to it), the tail tile of attention when T is not a multiple of 64,
//     generation's growing context, small test models. Compiling each would grow the map without
//     bound and stall the step on every new count, so they share one primitive per (transposes,
//     alpha, beta, thread count) whose dimensions and strides are given at run time
//     (DNNL_RUNTIME_DIM_VAL; oneDNN runs its gemm:jit kernels for it). Such a call creates its
//     three memory objects (they carry the dimensions) and releases them after execution.
//
// Which kind a call takes depends on its shape alone, so a shape always runs the same kernel and
// results are deterministic per shape, as the bitwise tests require. oneDNN itself allocates a
// few small blocks inside every execute (its map of the arguments); the counts are pinned in
// tests/kernels/gemm_test.cc.
//
// The map is per thread because memory objects are rebound per call; the training thread is the
// only caller in practice, and a second thread gets its own primitives rather than a lock.
//
// Mapping: row-major C (M,N) = alpha op(A) op(B) + beta C is matmul with src = op(A) (M,K),
// weights = op(B) (K,N), dst = C, each a plain strided 2-D tensor (a transposed operand is the
// stored one with its strides swapped). alpha is an output scale, beta = 1 a sum post-op
// (dst = alpha acc + dst).
//
// Threads: onednn_thread.h (train.blas_threads, applied per calling thread).
#include "brigade/kernels/cpu/gemm_onednn.h"

#include <atomic>
#include <cstring>
#include <dnnl.hpp>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/backend_registry.h"
#include "brigade/kernels/cpu/onednn_thread.h"

namespace brigade::detail {

namespace {

constexpr int64_t kStaticGrain = 32;
constexpr int64_t kRuntime = -1;  // M, N, K, lda, ldb, ldc of a run-time-shape entry's key

bool regular(int64_t M, int64_t N, int64_t K) {
  return M % kStaticGrain == 0 && N % kStaticGrain == 0 && K % kStaticGrain == 0;
}

struct Key {
  int64_t M, N, K, lda, ldb, ldc;
  uint32_t alpha_bits, beta_bits;
  int threads;
  bool trans_a, trans_b;
  bool bf16;  // bf16 src and weights (dst is f32 either way)
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    const auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(k.M), mix(k.N), mix(k.K), mix(k.lda), mix(k.ldb), mix(k.ldc);
    mix(k.alpha_bits), mix(k.beta_bits), mix(k.threads), mix(k.trans_a), mix(k.trans_b);
    mix(k.bf16);
    return h;
  }
};

struct Entry {
  dnnl::matmul prim;
  dnnl::memory src, weights, dst, scratchpad;
  std::unique_ptr<char[]> scratch;  // the scratchpad's bytes (may be empty)
  std::string impl;                 // oneDNN's name for the implementation it chose
};

using Cache = std::unordered_map<Key, Entry, KeyHash>;

std::atomic<int64_t> g_calls{0}, g_runtime_calls{0}, g_created{0}, g_scratch_bytes{0};
}  // namespace

void count_onednn_primitive(int64_t scratchpad_bytes) {
  g_created.fetch_add(1, std::memory_order_relaxed);
  g_scratch_bytes.fetch_add(scratchpad_bytes, std::memory_order_relaxed);
}

namespace {

Cache& cache() {
  thread_local Cache c;
  return c;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// A (rows, cols) view of a row-major array with row stride ld, transposed or not. kRuntime
// for all three gives the run-time-shape descriptor.
dnnl::memory::desc view(int64_t rows, int64_t cols, int64_t ld, bool trans, bool bf16 = false) {
  using dims = dnnl::memory::dims;
  const auto dim = [](int64_t v) { return v == kRuntime ? DNNL_RUNTIME_DIM_VAL : v; };
  return dnnl::memory::desc(dims{dim(rows), dim(cols)},
                            bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32,
                            trans ? dims{1, dim(ld)} : dims{dim(ld), 1});
}

Entry create(const Key& k, const dnnl::engine& engine) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.alpha_bits != bits(1.0f)) {
    float alpha;
    std::memcpy(&alpha, &k.alpha_bits, sizeof alpha);
    attr.set_output_scales(0, {alpha});
  }
  if (k.beta_bits == bits(1.0f)) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  const dnnl::memory::desc a = view(k.M, k.K, k.lda, k.trans_a, k.bf16);
  const dnnl::memory::desc b = view(k.K, k.N, k.ldb, k.trans_b, k.bf16);
  const dnnl::memory::desc c = view(k.M, k.N, k.ldc, false);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine);
  Entry e;
  e.prim = dnnl::matmul(pd);
  e.impl = pd.impl_info_str();
  if (k.M != kRuntime) {  // run-time-shape entries get their memory objects per call
    e.src = dnnl::memory(a, engine, DNNL_MEMORY_NONE);
    e.weights = dnnl::memory(b, engine, DNNL_MEMORY_NONE);
    e.dst = dnnl::memory(c, engine, DNNL_MEMORY_NONE);
  }
  const dnnl::memory::desc sd = pd.scratchpad_desc();
  const size_t scratch = sd.get_size();
  BRIGADE_CHECK(scratch != DNNL_RUNTIME_SIZE_VAL)
      << "oneDNN matmul " << e.impl << ": scratchpad size known only at run time";
  if (scratch > 0) {
    e.scratch.reset(new char[scratch + 64]);
    void* p = e.scratch.get() + (64 - reinterpret_cast<uintptr_t>(e.scratch.get()) % 64) % 64;
    e.scratchpad = dnnl::memory(sd, engine, p);
  } else {
    e.scratchpad = dnnl::memory(sd, engine, DNNL_MEMORY_NONE);
  }
  count_onednn_primitive(static_cast<int64_t>(scratch));
  return e;
}

// The entry a call of this shape uses: its own (regular shapes) or its family's run-time one.
Key make_key(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, int64_t lda,
             int64_t ldb, float beta, int64_t ldc, int threads, bool bf16 = false) {
  if (!regular(M, N, K)) M = N = K = lda = ldb = ldc = kRuntime;
  return Key{M, N, K, lda, ldb, ldc, bits(alpha), bits(beta), threads, trans_a, trans_b, bf16};
}

void check(dnnl_status_t st, const Entry& e, const char* what, int64_t M, int64_t N, int64_t K) {
  BRIGADE_CHECK(st == dnnl_success)
      << "oneDNN matmul " << what << " failed, status " << static_cast<int>(st) << " (" << e.impl
      << ", M=" << M << " N=" << N << " K=" << K << ")";
}

// A call of a run-time-shape entry: memory objects with this call's dimensions and strides.
template <typename T>
void execute_runtime(OneDnnThread& ctx, const Entry& e, bool trans_a, bool trans_b, int64_t M,
                     int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
                     float* C, int64_t ldc) {
  constexpr bool kBf16 = std::is_same_v<T, bf16>;
  const dnnl::memory::desc a = view(M, K, lda, trans_a, kBf16), b = view(K, N, ldb, trans_b, kBf16),
                           c = view(M, N, ldc, false);
  dnnl_memory_t ma = nullptr, mb = nullptr, mc = nullptr;
  const dnnl_engine_t eng = ctx.engine.get();
  check(dnnl_memory_create(&ma, &a.data, eng, const_cast<T*>(A)), e, "src", M, N, K);
  check(dnnl_memory_create(&mb, &b.data, eng, const_cast<T*>(B)), e, "weights", M, N, K);
  check(dnnl_memory_create(&mc, &c.data, eng, C), e, "dst", M, N, K);
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma},
                                  {DNNL_ARG_WEIGHTS, mb},
                                  {DNNL_ARG_DST, mc},
                                  {DNNL_ARG_SCRATCHPAD, e.scratchpad.get()}};
  const dnnl_status_t st = dnnl_primitive_execute(e.prim.get(), ctx.stream.get(), 4, args);
  dnnl_memory_destroy(ma);
  dnnl_memory_destroy(mb);
  dnnl_memory_destroy(mc);
  check(st, e, "execute", M, N, K);
  g_runtime_calls.fetch_add(1, std::memory_order_relaxed);
}

Entry& lookup(OneDnnThread& ctx, const Key& key) {
  Cache& c = cache();
  auto it = c.find(key);
  if (it == c.end()) it = c.emplace(key, create(key, ctx.engine)).first;
  return it->second;
}

// Both precisions: T is float (f32 operands) or bf16.
template <typename T>
void onednn_matmul(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                   const T* A, int64_t lda, const T* B, int64_t ldb, float beta, float* C,
                   int64_t ldc) {
  OneDnnThread& ctx = onednn_thread();
  const Key key = make_key(trans_a, trans_b, M, N, K, alpha, lda, ldb, beta, ldc, ctx.threads,
                           std::is_same_v<T, bf16>);
  Entry& e = lookup(ctx, key);
  g_calls.fetch_add(1, std::memory_order_relaxed);
  if (key.M == kRuntime) {
    execute_runtime(ctx, e, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc);
    return;
  }
  // oneDNN takes non-const handles; src and weights are only read.
  e.src.set_data_handle(const_cast<T*>(A));
  e.weights.set_data_handle(const_cast<T*>(B));
  e.dst.set_data_handle(C);
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, e.src.get()},
                                  {DNNL_ARG_WEIGHTS, e.weights.get()},
                                  {DNNL_ARG_DST, e.dst.get()},
                                  {DNNL_ARG_SCRATCHPAD, e.scratchpad.get()}};
  check(dnnl_primitive_execute(e.prim.get(), ctx.stream.get(), 4, args), e, "execute", M, N, K);
}

void onednn_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                  int64_t ldc) {
  onednn_matmul(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void onednn_bf16gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta, float* C,
                     int64_t ldc) {
  onednn_matmul(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void onednn_set_threads(int n) {
  set_onednn_threads(n);
}

std::string onednn_library() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + (v->cpu_runtime == DNNL_RUNTIME_OMP ? " OpenMP" : "");
}

}  // namespace

const BackendOps& onednn_backend_ops() {
  // GELU and LayerNorm too: 1.6-3.7x the hand-written kernels, backward included
  // (bench/RESULTS.md).
  static const BackendOps ops{.name = "onednn",
                              .sgemm = onednn_sgemm,
                              .bf16gemm = onednn_bf16gemm,
                              .set_threads = onednn_set_threads,
                              .library = onednn_library,
                              .gelu_forward = onednn_gelu_forward,
                              .gelu_backward = onednn_gelu_backward,
                              .layernorm_forward = onednn_layernorm_forward,
                              .layernorm_backward = onednn_layernorm_backward};
  return ops;
}

bool onednn_native_bf16() {
  // The ISA values are bit sets: each includes the bits of the ISAs it extends.
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (isa & bf16) == bf16;
}

OneDnnGemmStats onednn_gemm_stats() {
  return OneDnnGemmStats{g_calls.load(), g_runtime_calls.load(), g_created.load(),
                         g_scratch_bytes.load()};
}

std::string onednn_gemm_impl(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                             float alpha, int64_t lda, int64_t ldb, float beta, int64_t ldc,
                             bool bf16) {
  OneDnnThread& ctx = onednn_thread();
  return lookup(ctx,
                make_key(trans_a, trans_b, M, N, K, alpha, lda, ldb, beta, ldc, ctx.threads, bf16))
      .impl;
}

}  // namespace brigade::detail
