// gemm() on each backend against a naive double-precision product: every transpose combination,
// alpha, beta 0 (C overwritten, even NaN) and 1 (accumulated), and tiles inside larger matrices
// (leading dimensions above the row length, elements outside the tile untouched). Then what the
// bitwise claims elsewhere rest on (same shape => bitwise the same result, wherever the buffers
// are), that the backend switch really switches, and that oneDNN creates its primitives once
// per shape and afterwards neither creates nor allocates anything. Last, the bf16-operand path
// (train.precision = "bf16") against the exact product of the rounded operands and within
// bf16's error bound of the f32 product.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>
#include <ostream>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/kernels/cpu/gemm_onednn.h"
#include "brigade/tensor/bf16.h"
#include "common/counted_allocations.h"
#include "gemm_backends.h"
#include "grad_check.h"

namespace brigade {
namespace {

using test::all_close;
using test::random_vector;

struct Case {
  bool trans_a, trans_b;
  int64_t M, N, K;
  int64_t pad;  // extra elements per row of A, B and C: the tile sits in a wider matrix
  float alpha, beta;
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << (c.trans_a ? "T" : "N") << (c.trans_b ? "T" : "N") << "_M" << c.M << "_N" << c.N
            << "_K" << c.K << "_pad" << c.pad << "_alpha" << (c.alpha == 1.0f ? "1" : "x")
            << "_beta" << static_cast<int>(c.beta);
}

struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<float> A, B, C;
};

Operands make_operands(const Case& c, uint64_t seed) {
  Operands o;
  const int64_t a_rows = c.trans_a ? c.K : c.M, a_cols = c.trans_a ? c.M : c.K;
  const int64_t b_rows = c.trans_b ? c.N : c.K, b_cols = c.trans_b ? c.K : c.N;
  o.lda = a_cols + c.pad;
  o.ldb = b_cols + c.pad;
  o.ldc = c.N + c.pad;
  o.A = random_vector(a_rows * o.lda, seed);
  o.B = random_vector(b_rows * o.ldb, seed + 1);
  o.C = random_vector(c.M * o.ldc, seed + 2);
  return o;
}

// The expected C, in double: the tile is alpha op(A) op(B) + beta C, the padding unchanged.
std::vector<double> naive_gemm(const Case& c, const Operands& o) {
  std::vector<double> out(o.C.begin(), o.C.end());
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < c.N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = c.trans_a ? o.A[k * o.lda + m] : o.A[m * o.lda + k];
        const double b = c.trans_b ? o.B[n * o.ldb + k] : o.B[k * o.ldb + n];
        acc += a * b;
      }
      double& dst = out[m * o.ldc + n];
      dst = c.alpha * acc + (c.beta == 0.0f ? 0.0 : dst);
    }
  }
  return out;
}

void run(const Case& c, Operands& o, float* C) {
  gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta,
       C, o.ldc);
}

class GemmTest : public ::testing::TestWithParam<std::tuple<GemmBackend, Case>> {
 protected:
  test::ScopedGemmBackend backend_{std::get<0>(GetParam())};
  const Case c = std::get<1>(GetParam());
};

TEST_P(GemmTest, MatchesNaive) {
  Operands o = make_operands(c, 1);
  const std::vector<double> expected = naive_gemm(c, o);
  run(c, o, o.C.data());
  // |error| <= K * 2^-24 * sum |a b| per element, and |a b| <= 1 here: 1e-6 K covers it with the
  // margin of a blocked sum; a wrong transpose or stride is an O(1) error.
  EXPECT_TRUE(all_close(o.C, expected, 1e-5, 1e-6 * c.K + 1e-6));
}

TEST_P(GemmTest, BetaZeroOverwritesNaN) {
  Case c0 = c;  // the case's shape with beta = 0 (beta = 1 would read C)
  c0.beta = 0.0f;
  Operands o = make_operands(c0, 2);
  const std::vector<double> expected = naive_gemm(c0, o);  // the padding keeps its values
  for (int64_t m = 0; m < c0.M; ++m) {
    for (int64_t n = 0; n < c0.N; ++n) {
      o.C[m * o.ldc + n] = std::numeric_limits<float>::quiet_NaN();
    }
  }
  run(c0, o, o.C.data());
  EXPECT_TRUE(all_close(o.C, expected, 1e-5, 1e-6 * c.K + 1e-6));
}

// Same shape, other buffers (moved by one float, so differently aligned): bitwise the same
// result. Split backward == fused backward and bitwise resume rely on this.
TEST_P(GemmTest, DeterministicWhereverTheBuffersAre) {
  Operands o = make_operands(c, 3);
  std::vector<float> first = o.C;
  run(c, o, first.data());
  Operands shifted = o;
  shifted.A.insert(shifted.A.begin(), 0.0f);
  shifted.B.insert(shifted.B.begin(), 0.0f);
  std::vector<float> second(o.C.size() + 1);
  std::copy(o.C.begin(), o.C.end(), second.begin() + 1);
  gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, shifted.A.data() + 1, o.lda,
       shifted.B.data() + 1, o.ldb, c.beta, second.data() + 1, o.ldc);
  second.erase(second.begin());
  EXPECT_EQ(first, second);
}

// The model's shapes (linear layers at bench-small sizes and the attention tiles) and small odd
// ones, every transpose combination, with and without padding, alpha and beta.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      out.push_back({ta, tb, 1, 1, 1, 0, 1.0f, 0.0f});
      out.push_back({ta, tb, 7, 5, 13, 0, 1.0f, 1.0f});
      out.push_back({ta, tb, 33, 17, 64, 3, 0.125f, 0.0f});
      out.push_back({ta, tb, 64, 64, 64, 128, 0.125f, 1.0f});
      out.push_back({ta, tb, 61, 64, 16, 45, 1.0f, 1.0f});
    }
  }
  out.push_back({false, true, 256, 768, 256, 0, 1.0f, 0.0f});   // c_attn forward
  out.push_back({false, false, 256, 256, 768, 0, 1.0f, 1.0f});  // c_attn dX
  out.push_back({true, false, 768, 256, 256, 0, 1.0f, 1.0f});   // c_attn dW
  return out;
}

struct CaseName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    std::ostringstream os;
    os << gemm_backend_name(std::get<0>(info.param)) << "_" << std::get<1>(info.param);
    return os.str();
  }
};

INSTANTIATE_TEST_SUITE_P(Cases, GemmTest,
                         ::testing::Combine(test::kGemmBackends, ::testing::ValuesIn(cases())),
                         CaseName{});

TEST(GemmBackend, NamesRoundTrip) {
  for (GemmBackend b : {GemmBackend::kOneDnn, GemmBackend::kOpenBlas}) {
    GemmBackend parsed{};
    ASSERT_TRUE(parse_gemm_backend(gemm_backend_name(b), &parsed));
    EXPECT_EQ(parsed, b);
  }
  GemmBackend untouched = GemmBackend::kOpenBlas;
  EXPECT_FALSE(parse_gemm_backend("mkl", &untouched));
  EXPECT_EQ(untouched, GemmBackend::kOpenBlas);
  EXPECT_STREQ(gemm_backend_name(GemmBackend::kOneDnn), "onednn");
  EXPECT_EQ(gemm_backend(), GemmBackend::kOneDnn);  // the default
}

TEST(GemmBackend, SwitchRoutesCalls) {
  const Case c{false, true, 32, 48, 40, 0, 1.0f, 0.0f};
  Operands o = make_operands(c, 4);
  {
    test::ScopedGemmBackend openblas(GemmBackend::kOpenBlas);
    const int64_t before = detail::onednn_gemm_stats().calls;
    run(c, o, o.C.data());
    EXPECT_EQ(detail::onednn_gemm_stats().calls, before);
  }
  const int64_t before = detail::onednn_gemm_stats().calls;
  run(c, o, o.C.data());
  EXPECT_EQ(detail::onednn_gemm_stats().calls, before + 1);
}

// After one call per shape, the hot loop's calls reuse their primitives: none is created. Regular
// shapes also reuse their memory objects and scratchpads, so brigade allocates nothing for them.
// Every operator new and posix_memalign of this binary is counted, oneDNN's included, and
// oneDNN 2.6 does allocate inside dnnl_primitive_execute: the map of the call's arguments
// (std::unordered_map: a node per argument and the bucket array) and a std::function for its
// parallel loop, 5-7 blocks of 8-104 bytes per call (measured by a backtrace per allocation).
// The bound of 8 per regular call admits exactly that; one memory object of brigade's own per
// call (1-2 blocks), or a primitive, exceeds it. Run-time shapes create their three memory
// objects per call and gemm:jit allocates its packing buffers, a number that depends on the
// shape but not on how often it has run: every pass over the same calls allocates the same.
constexpr int64_t kStaticCallAllocations = 8;

struct Counted {
  int64_t calls = 0, created = 0;
  std::vector<int64_t> allocations;  // per pass
};

// One warm-up pass over the cases, then `passes` counted ones (each case once, and the first
// once more into another output buffer, so handles are rebound).
Counted count_warm_calls(const std::vector<Case>& shapes, int passes) {
  std::vector<Operands> ops;
  for (size_t i = 0; i < shapes.size(); ++i) ops.push_back(make_operands(shapes[i], 10 + i));
  for (size_t i = 0; i < shapes.size(); ++i) run(shapes[i], ops[i], ops[i].C.data());  // warm-up
  std::vector<float> other(ops[0].C.size());
  const detail::OneDnnGemmStats warm = detail::onednn_gemm_stats();
  Counted out;
  for (int pass = 0; pass < passes; ++pass) {
    testing::CountedAllocations counted;
    for (size_t i = 0; i < shapes.size(); ++i) run(shapes[i], ops[i], ops[i].C.data());
    run(shapes[0], ops[0], other.data());
    out.allocations.push_back(counted.count());
  }
  const detail::OneDnnGemmStats after = detail::onednn_gemm_stats();
  out.calls = after.calls - warm.calls;
  out.created = after.primitives_created - warm.primitives_created;
  return out;
}

TEST(GemmOneDnn, NothingCreatedAndNoAllocationOfOursAfterWarmup) {
  test::ScopedGemmBackend onednn(GemmBackend::kOneDnn);
  std::vector<Case> regular, irregular;
  for (const Case& c : cases()) {
    (c.M % 32 == 0 && c.N % 32 == 0 && c.K % 32 == 0 ? regular : irregular).push_back(c);
  }
  ASSERT_GE(regular.size(), 4u);
  ASSERT_GE(irregular.size(), 4u);
  constexpr int kPasses = 3;
  const int64_t runtime_before = detail::onednn_gemm_stats().runtime_calls;
  const Counted r = count_warm_calls(regular, kPasses);
  EXPECT_EQ(detail::onednn_gemm_stats().runtime_calls, runtime_before);  // all their own
  EXPECT_EQ(r.calls, kPasses * static_cast<int64_t>(regular.size() + 1));
  EXPECT_EQ(r.created, 0);
  for (int64_t a : r.allocations) {
    EXPECT_LE(a, kStaticCallAllocations * static_cast<int64_t>(regular.size() + 1));
  }
  const Counted v = count_warm_calls(irregular, kPasses);
  EXPECT_EQ(detail::onednn_gemm_stats().runtime_calls - runtime_before,
            v.calls + static_cast<int64_t>(irregular.size()));  // warm-up included
  EXPECT_EQ(v.created, 0);
  for (int64_t a : v.allocations) EXPECT_EQ(a, v.allocations.front());
  std::printf("heap blocks per call after warm-up: regular %.2f, run-time shape %.2f\n",
              static_cast<double>(r.allocations.front()) / (regular.size() + 1),
              static_cast<double>(v.allocations.front()) / (irregular.size() + 1));
}

// Row counts that change call by call (an expert's tokens) share one primitive per family: a
// hundred different M create at most the one run-time primitive, and each result is right.
TEST(GemmOneDnn, VaryingRowsShareOnePrimitive) {
  test::ScopedGemmBackend onednn(GemmBackend::kOneDnn);
  const Case first{false, true, 1, 96, 64, 0, 1.0f, 0.0f};
  Operands o0 = make_operands(first, 6);
  run(first, o0, o0.C.data());
  const int64_t created = detail::onednn_gemm_stats().primitives_created;
  for (int64_t M = 2; M <= 101; ++M) {
    if (M % 32 == 0) continue;  // regular: its own primitive
    const Case c{false, true, M, 96, 64, 0, 1.0f, 0.0f};
    Operands o = make_operands(c, 7 + M);
    const std::vector<double> expected = naive_gemm(c, o);
    run(c, o, o.C.data());
    ASSERT_TRUE(all_close(o.C, expected, 1e-5, 1e-6 * c.K + 1e-6)) << "M=" << M;
  }
  EXPECT_EQ(detail::onednn_gemm_stats().primitives_created, created);
}

// The thread count is part of a primitive's shape: changing it creates new primitives (with
// the new count) instead of running old ones on a team of another size.
TEST(GemmOneDnn, ThreadCountChangeGetsItsOwnPrimitive) {
  test::ScopedGemmBackend onednn(GemmBackend::kOneDnn);
  const Case c{false, false, 96, 80, 72, 0, 1.0f, 0.0f};
  Operands o = make_operands(c, 5);
  std::vector<float> one = o.C, two = o.C;
  set_blas_threads(1);
  run(c, o, one.data());
  const int64_t created = detail::onednn_gemm_stats().primitives_created;
  set_blas_threads(2);
  run(c, o, two.data());
  set_blas_threads(1);
  EXPECT_EQ(detail::onednn_gemm_stats().primitives_created, created + 1);
  EXPECT_TRUE(all_close(two, naive_gemm(c, o), 1e-5, 1e-6 * c.K + 1e-6));
  run(c, o, two.data());
  EXPECT_EQ(detail::onednn_gemm_stats().primitives_created, created + 1);  // cached again
  EXPECT_EQ(one, two);
}

// ---- bf16 operands ----

// Selects an operand precision until the end of the scope.
class ScopedGemmPrecision {
 public:
  explicit ScopedGemmPrecision(GemmPrecision p) : previous_(gemm_precision()) {
    set_gemm_precision(p);
  }
  ~ScopedGemmPrecision() { set_gemm_precision(previous_); }
  ScopedGemmPrecision(const ScopedGemmPrecision&) = delete;
  ScopedGemmPrecision& operator=(const ScopedGemmPrecision&) = delete;

 private:
  GemmPrecision previous_;
};

// The operands as the bf16 path multiplies them: every element rounded to bf16.
Operands rounded(Operands o) {
  for (std::vector<float>* v : {&o.A, &o.B}) {
    for (float& x : *v) x = bf16_to_float(float_to_bf16(x));
  }
  return o;
}

// Per element of C: |alpha| sum_k |a_k b_k|, the scale of the product's rounding error.
std::vector<double> abs_products(const Case& c, const Operands& o) {
  Operands a = o;
  for (std::vector<float>* v : {&a.A, &a.B}) {
    for (float& x : *v) x = std::fabs(x);
  }
  Case no_c = c;
  no_c.alpha = std::fabs(c.alpha);
  no_c.beta = 0.0f;
  return naive_gemm(no_c, a);
}

// On both backends: oneDNN's bf16 matmul where this CPU has one natively, else (and on OpenBLAS)
// the f32 GEMM of the rounded operands; both must meet the same bounds.
class GemmBf16Test : public ::testing::TestWithParam<std::tuple<GemmBackend, Case>> {
 protected:
  test::ScopedGemmBackend backend_{std::get<0>(GetParam())};
  ScopedGemmPrecision bf16_{GemmPrecision::kBf16};
  const Case c = std::get<1>(GetParam());
};

// Against the double product of the rounded operands only f32 accumulation error is left: the
// f32 test's tolerance. Unrounded operands differ from rounded ones by up to 2^-8 relative per
// element, orders above it, so a call that skipped the conversion fails here.
TEST_P(GemmBf16Test, EqualsTheExactProductOfTheRoundedOperands) {
  Operands o = make_operands(c, 21);
  const std::vector<double> expected = naive_gemm(c, rounded(o));
  run(c, o, o.C.data());
  EXPECT_TRUE(all_close(o.C, expected, 1e-5, 1e-6 * c.K + 1e-6));
}

// Against the f32 operands: bf16 keeps 8 significant bits, so each operand is off by at most
// u = 2^-8 relative and each product by 2u + u^2: |C - C_exact| <= (2u + u^2) |alpha| sum |a b|
// plus the f32 accumulation term.
TEST_P(GemmBf16Test, WithinBf16sBoundOfTheF32Product) {
  Operands o = make_operands(c, 22);
  const std::vector<double> exact = naive_gemm(c, o), scale = abs_products(c, o);
  run(c, o, o.C.data());
  const double u = std::ldexp(1.0, -8);
  double worst = 0;
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < c.N; ++n) {
      const int64_t i = m * o.ldc + n;
      const double err = std::fabs(o.C[i] - exact[i]);
      const double bound = (2 * u + u * u) * scale[i] + 1e-6 * c.K + 1e-6;
      ASSERT_LE(err, bound) << "C[" << m << "," << n << "]";
      worst = std::max(worst, err / bound);
    }
  }
  std::printf("worst error / bound %.3f\n", worst);
}

// gemm_f32 ignores the bf16 choice: bitwise the f32 product (the same sgemm call), which the
// rounded operands of gemm() under bf16 do not give.
TEST_P(GemmBf16Test, GemmF32KeepsF32OperandsUnderBf16) {
  Operands o = make_operands(c, 23);
  std::vector<float> f32_result = o.C, bf16_result = o.C, forced = o.C;
  run(c, o, bf16_result.data());
  gemm_f32(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb,
           c.beta, forced.data(), o.ldc);
  {
    ScopedGemmPrecision f32(GemmPrecision::kF32);
    run(c, o, f32_result.data());
  }
  EXPECT_EQ(forced, f32_result);
  if (c.K > 0 && c.M > 0 && c.N > 0) {
    EXPECT_NE(forced, bf16_result);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GemmBf16Test,
                         ::testing::Combine(test::kGemmBackends, ::testing::ValuesIn(cases())),
                         CaseName{});

TEST(GemmBf16, NamesRoundTripAndF32IsTheDefault) {
  EXPECT_EQ(gemm_precision(), GemmPrecision::kF32);
  for (GemmPrecision p : {GemmPrecision::kF32, GemmPrecision::kBf16}) {
    GemmPrecision parsed{};
    ASSERT_TRUE(parse_gemm_precision(gemm_precision_name(p), &parsed));
    EXPECT_EQ(parsed, p);
  }
  GemmPrecision untouched = GemmPrecision::kBf16;
  EXPECT_FALSE(parse_gemm_precision("fp16", &untouched));
  EXPECT_EQ(untouched, GemmPrecision::kBf16);
}

// Where the library has no native bf16 matmul (Debian's OpenBLAS everywhere), bf16 runs as the
// f32 GEMM of the rounded operands: bitwise that product, which differs from the f32 product of
// the unrounded operands (so a call that skipped the rounding fails here).
TEST(GemmBf16, WithoutANativeBf16GemmTheF32GemmMultipliesTheRoundedOperands) {
  test::ScopedGemmBackend openblas(GemmBackend::kOpenBlas);
  int differ_from_f32 = 0;
  for (const Case& c : cases()) {
    SCOPED_TRACE(::testing::PrintToString(c));
    Operands o = make_operands(c, 31);
    Operands r = rounded(o);
    std::vector<float> expected = r.C;
    run(c, r, expected.data());  // f32: the rounded operands' product
    std::vector<float> unrounded = o.C;
    run(c, o, unrounded.data());
    ScopedGemmPrecision bf16(GemmPrecision::kBf16);
    EXPECT_TRUE(bf16_gemm_runs_in_f32());
    run(c, o, o.C.data());
    EXPECT_EQ(o.C, expected);
    differ_from_f32 += o.C != unrounded;
  }
  EXPECT_GT(differ_from_f32, 0);
  EXPECT_FALSE(bf16_gemm_runs_in_f32());  // f32 again
}

// The bf16 path's operand buffers grow once: after warm-up its calls allocate no more than f32
// calls of the same shapes (oneDNN's own per-execute blocks), and create no primitive.
TEST(GemmBf16, NothingCreatedAndNoAllocationOfOursAfterWarmup) {
  test::ScopedGemmBackend onednn(GemmBackend::kOneDnn);
  ScopedGemmPrecision bf16(GemmPrecision::kBf16);
  std::vector<Case> regular;
  for (const Case& c : cases()) {
    if (c.M % 32 == 0 && c.N % 32 == 0 && c.K % 32 == 0) regular.push_back(c);
  }
  const Counted r = count_warm_calls(regular, 3);
  EXPECT_EQ(r.created, 0);
  for (int64_t a : r.allocations) {
    EXPECT_LE(a, kStaticCallAllocations * static_cast<int64_t>(regular.size() + 1));
  }
  if (bf16_gemm_is_native()) {
    std::printf(
        "oneDNN bf16 implementation of the c_attn forward: %s\n",
        detail::onednn_gemm_impl(false, true, 256, 768, 256, 1.0f, 256, 256, 0.0f, 768, true)
            .c_str());
  }
}

}  // namespace
}  // namespace brigade
