// The element-wise kernels compiled per ISA (kernels/cpu/elementwise_kernels.inc) agree bitwise
// with the default (x86-64-v2) path on every kernel, every tail length and the edge values, so
// the run-time dispatch changes speed and nothing else. Both arms run in this process
// (set_elementwise_isa); on a CPU without AVX2 there is nothing to compare and the tests skip.
// Also: the row helpers equal vec.h's bitwise, BRIGADE_ISA forces the default path, and the
// ISA object files define no weak symbol (which could put AVX-512 code on a baseline CPU).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "brigade/kernels/cpu/attention.h"
#include "brigade/kernels/cpu/crossentropy.h"
#include "brigade/kernels/cpu/elementwise_ops.h"
#include "brigade/kernels/cpu/gelu.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/kernels/cpu/kernel_isa.h"
#include "brigade/kernels/cpu/layernorm.h"
#include "brigade/kernels/cpu/optim.h"
#include "brigade/kernels/cpu/residual.h"
#include "brigade/kernels/cpu/vec.h"
#include "brigade/kernels/cpu/vocab_parallel.h"
#include "grad_check.h"

namespace brigade {
namespace {

using Bits = std::vector<uint32_t>;

constexpr KernelIsa kWide[] = {KernelIsa::kAvx2, KernelIsa::kAvx512};

void append(Bits& out, const float* x, size_t n) {
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, x, n * sizeof(float));
}
void append(Bits& out, const std::vector<float>& x) {
  append(out, x.data(), x.size());
}
void append(Bits& out, double x) {
  uint32_t w[2];
  std::memcpy(w, &x, sizeof x);
  out.insert(out.end(), w, w + 2);
}

// Lengths around every vector width (4, 8, 16), the 8 partial sums and the 256-element runs.
const std::vector<int64_t> kLengths = {1,  2,  3,  4,   5,   7,   8,   9,   12,  15,   16,  17,
                                       31, 33, 63, 100, 255, 256, 257, 259, 771, 1000, 4099};

// Random values with the edge cases mixed in: signed zeros, large magnitudes (exp and tanh
// saturate), and for exp arguments -inf.
std::vector<float> inputs(int64_t n, uint64_t seed, float lo, float hi, bool with_neg_inf = false) {
  std::vector<float> x = test::random_vector(n, seed, lo, hi);
  const float specials[] = {0.0f, -0.0f, 30.0f, -30.0f, 1e-30f, -1e-30f};
  for (int64_t i = 0; i < n; i += 7) x[i] = specials[(i / 7) % 6];
  if (with_neg_inf && n > 3) x[3] = -std::numeric_limits<float>::infinity();
  return x;
}

class IsaGuard {
 public:
  IsaGuard() : isa_(elementwise_isa()), backend_(gemm_backend()) {}
  ~IsaGuard() {
    set_elementwise_isa(isa_);
    set_gemm_backend(backend_);
  }

 private:
  KernelIsa isa_;
  GemmBackend backend_;
};

// Runs `kernel` (which computes from fixed inputs and returns its outputs' bits) under the
// default ISA and under every wider one this CPU has; each must match the default bitwise.
template <class Kernel>
void expect_isas_agree(const std::string& what, Kernel kernel) {
  IsaGuard guard;
  set_gemm_backend(GemmBackend::kOpenBlas);  // GELU and LayerNorm: the hand-written kernels
  set_elementwise_isa(KernelIsa::kDefault);
  const Bits ref = kernel();
  ASSERT_FALSE(ref.empty()) << what;
  for (KernelIsa isa : kWide) {
    if (!kernel_isa_supported(isa)) continue;
    set_elementwise_isa(isa);
    ASSERT_EQ(elementwise_isa(), isa);
    const Bits got = kernel();
    ASSERT_EQ(got.size(), ref.size()) << what;
    for (size_t i = 0; i < ref.size(); ++i) {
      float r, g;
      std::memcpy(&r, &ref[i], 4);
      std::memcpy(&g, &got[i], 4);
      ASSERT_EQ(got[i], ref[i]) << what << ": " << kernel_isa_name(isa)
                                << " differs from default at " << i << " of " << ref.size() << " ("
                                << g << " vs " << r << ")";
    }
  }
}

class ElementwiseIsa : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernel_isa_supported(KernelIsa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  }
};

TEST_F(ElementwiseIsa, Gelu) {
  for (int64_t n : kLengths) {
    expect_isas_agree("gelu n=" + std::to_string(n), [n] {
      const auto x = inputs(n, 1 + n, -6.0f, 6.0f), dout = inputs(n, 2 + n, -1.0f, 1.0f);
      std::vector<float> out(n), dinp = test::random_vector(n, 3 + n), inplace = x;
      gelu_forward(out.data(), x.data(), n);
      gelu_forward(inplace.data(), inplace.data(), n);
      gelu_backward(dinp.data(), x.data(), dout.data(), n);
      Bits b;
      append(b, out);
      append(b, inplace);
      append(b, dinp);
      return b;
    });
  }
}

TEST_F(ElementwiseIsa, LayerNorm) {
  for (int64_t C : {1, 3, 7, 8, 9, 16, 17, 64, 256, 769}) {
    expect_isas_agree("layernorm C=" + std::to_string(C), [C] {
      const int64_t N = 5;
      const auto x = inputs(N * C, 10 + C, -3.0f, 3.0f), w = test::random_vector(C, 11 + C);
      const auto bias = test::random_vector(C, 12 + C), dout = test::random_vector(N * C, 13 + C);
      std::vector<float> out(N * C), mean(N), rstd(N);
      std::vector<float> dx = test::random_vector(N * C, 14), dw(C, 0.5f), db(C, -0.25f);
      layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N,
                        C);
      layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                         mean.data(), rstd.data(), N, C);
      Bits b;
      for (const auto* v : {&out, &mean, &rstd, &dx, &dw, &db}) append(b, *v);
      return b;
    });
  }
}

TEST_F(ElementwiseIsa, Residual) {
  for (int64_t n : kLengths) {
    expect_isas_agree("residual n=" + std::to_string(n), [n] {
      const auto a = inputs(n, 20 + n, -2.0f, 2.0f), c = inputs(n, 21 + n, -2.0f, 2.0f);
      std::vector<float> out(n), d1 = test::random_vector(n, 22), d2 = test::random_vector(n, 23);
      residual_forward(out.data(), a.data(), c.data(), n);
      residual_backward(d1.data(), d2.data(), a.data(), n);
      Bits b;
      for (const auto* v : {&out, &d1, &d2}) append(b, *v);
      return b;
    });
  }
}

TEST_F(ElementwiseIsa, Attention) {
  // T across the 128-row tiles (a partial tile, several key blocks); head sizes 64 and 32.
  for (int64_t T : {1, 5, 127, 128, 129, 300}) {
    for (auto [C, NH] : {std::array<int64_t, 2>{64, 1}, std::array<int64_t, 2>{96, 3}}) {
      expect_isas_agree("attention T=" + std::to_string(T) + " C=" + std::to_string(C), [=] {
        const int64_t B = 2;
        const auto qkv = inputs(B * T * 3 * C, 30 + T, -2.0f, 2.0f);
        const auto dout = test::random_vector(B * T * C, 31 + T);
        std::vector<float> out(B * T * C), lse(B * NH * T), dqkv(B * T * 3 * C, 0.0f);
        attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
        attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C,
                           NH);
        Bits b;
        for (const auto* v : {&out, &lse, &dqkv}) append(b, *v);
        return b;
      });
    }
  }
}

TEST_F(ElementwiseIsa, CrossEntropyAndVocabParallel) {
  for (int64_t V : {1, 3, 5, 16, 255, 256, 257, 1000, 50257}) {
    expect_isas_agree("crossentropy V=" + std::to_string(V), [V] {
      const int64_t N = 4;
      const auto logits = inputs(N * V, 40 + V, -8.0f, 8.0f, /*with_neg_inf=*/true);
      const std::vector<int32_t> targets = {0, static_cast<int32_t>(V - 1), -1,
                                            static_cast<int32_t>(V / 2)};
      std::vector<float> losses(N), lse(N), dlogits(N * V), inplace = logits;
      crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
      crossentropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), 0.37f, N, V);
      crossentropy_backward(inplace.data(), inplace.data(), lse.data(), targets.data(), 1.0f, N, V);
      // One shard of a two-way vocabulary split (padded to an even width).
      const int64_t Vl = (V + 1) / 2, v0 = Vl;
      std::vector<float> shard(N * Vl), row_max(N), sums(2 * N), dshard(N * Vl);
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t j = 0; j < Vl; ++j) {
          shard[n * Vl + j] = v0 + j < V ? logits[n * V + v0 + j] : 0.0f;
        }
      }
      vocab_parallel_ce_max(row_max.data(), shard.data(), N, Vl, v0, V);
      vocab_parallel_ce_sums(sums.data(), shard.data(), row_max.data(), targets.data(), N, Vl, v0,
                             V);
      vocab_parallel_ce_backward(dshard.data(), shard.data(), lse.data(), targets.data(), 0.5f, N,
                                 Vl, v0, V);
      Bits b;
      for (const auto* v : {&losses, &lse, &dlogits, &inplace, &row_max, &sums, &dshard}) {
        append(b, *v);
      }
      return b;
    });
  }
}

TEST_F(ElementwiseIsa, OptimizerUpdates) {
  for (int64_t n : kLengths) {
    expect_isas_agree("optimizers n=" + std::to_string(n), [n] {
      std::vector<float> p = test::random_vector(n, 50 + n), m = test::random_vector(n, 51 + n);
      std::vector<float> v = test::random_vector(n, 52 + n, 0.0f, 1e-3f);
      const auto grad = inputs(n, 53 + n, -1.0f, 1.0f);
      Bits b;
      for (int64_t step = 1; step <= 3; ++step) {
        adamw_update(p.data(), grad.data(), m.data(), v.data(), n,
                     AdamWParams{.lr = 1e-3f, .weight_decay = 0.1f, .step = step});
      }
      for (const auto* x : {&p, &m, &v}) append(b, *x);
      for (bool nesterov : {false, true}) {
        for (float mu : {0.0f, 0.9f}) {
          std::vector<float> q = test::random_vector(n, 54 + n), buf = test::random_vector(n, 55);
          sgd_update(
              q.data(), grad.data(), buf.data(), n,
              SgdParams{.lr = 0.1f, .momentum = mu, .weight_decay = 0.01f, .nesterov = nesterov});
          append(b, q);
          append(b, buf);
        }
      }
      append(b, sum_squares(grad.data(), n));
      std::vector<float> s = grad;
      scale_inplace(s.data(), 0.3f, n);
      append(b, s);
      std::vector<float> bad = grad;
      bad[n - 1] = std::numeric_limits<float>::quiet_NaN();
      b.push_back(all_finite(grad.data(), n));
      b.push_back(all_finite(bad.data(), n));
      return b;
    });
  }
}

// LayerNorm as written before it was compiled per ISA (scalar loops, eight partial sums): every
// ISA's kernel must still compute exactly this.
void layernorm_scalar(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                      const float* bias, int64_t N, int64_t C, float* dinp, float* dweight,
                      float* dbias, const float* dout) {
  constexpr int L = 8;
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float m = detail::sum(x, C) / static_cast<float>(C);
    float acc[L] = {};
    int64_t c = 0;
    for (; c + L <= C; c += L) {
      for (int l = 0; l < L; ++l) acc[l] += (x[c + l] - m) * (x[c + l] - m);
    }
    float var = 0.0f;
    for (; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    for (int l = 0; l < L; ++l) var += acc[l];
    var /= static_cast<float>(C);
    const float s = 1.0f / std::sqrt(var + 1e-5f);
    for (c = 0; c < C; ++c) out[n * C + c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
    const float* d = dout + n * C;
    float acc_g[L] = {}, acc_gx[L] = {};
    for (c = 0; c + L <= C; c += L) {
      for (int l = 0; l < L; ++l) {
        const float xhat = (x[c + l] - m) * s, g = weight[c + l] * d[c + l];
        acc_g[l] += g;
        acc_gx[l] += g * xhat;
      }
    }
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (; c < C; ++c) {
      const float xhat = (x[c] - m) * s, g = weight[c] * d[c];
      sum_g += g;
      sum_gx += g * xhat;
    }
    for (int l = 0; l < L; ++l) {
      sum_g += acc_g[l];
      sum_gx += acc_gx[l];
    }
    const float mean_g = sum_g / static_cast<float>(C), mean_gx = sum_gx / static_cast<float>(C);
    for (c = 0; c < C; ++c) {
      const float xhat = (x[c] - m) * s, g = weight[c] * d[c];
      dbias[c] += d[c];
      dweight[c] += xhat * d[c];
      dinp[n * C + c] += s * (g - mean_g - xhat * mean_gx);
    }
  }
}

TEST_F(ElementwiseIsa, LayerNormEqualsTheScalarLoops) {
  IsaGuard guard;
  set_gemm_backend(GemmBackend::kOpenBlas);
  for (KernelIsa isa : {KernelIsa::kDefault, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    if (!kernel_isa_supported(isa)) continue;
    set_elementwise_isa(isa);
    for (int64_t C : {1, 7, 8, 17, 64, 256, 769}) {
      const int64_t N = 3;
      const auto x = inputs(N * C, 70 + C, -3.0f, 3.0f), w = test::random_vector(C, 71 + C);
      const auto bias = test::random_vector(C, 72 + C), dout = test::random_vector(N * C, 73 + C);
      std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C, 0.1f), dw(C, 0.5f), db(C, -0.25f);
      std::vector<float> out_r = out, mean_r = mean, rstd_r = rstd, dx_r = dx, dw_r = dw, db_r = db;
      layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N,
                        C);
      layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                         mean.data(), rstd.data(), N, C);
      layernorm_scalar(out_r.data(), mean_r.data(), rstd_r.data(), x.data(), w.data(), bias.data(),
                       N, C, dx_r.data(), dw_r.data(), db_r.data(), dout.data());
      const std::string at = std::string(kernel_isa_name(isa)) + " C=" + std::to_string(C);
      EXPECT_EQ(out, out_r) << at;
      EXPECT_EQ(mean, mean_r) << at;
      EXPECT_EQ(rstd, rstd_r) << at;
      EXPECT_EQ(dx, dx_r) << at;
      EXPECT_EQ(dw, dw_r) << at;
      EXPECT_EQ(db, db_r) << at;
    }
  }
}

// The table's row helpers against vec.h's (compiled here, for the baseline), for every ISA.
TEST_F(ElementwiseIsa, RowHelpersEqualVecH) {
  std::vector<const detail::ElementwiseOps*> tables = {&detail::elementwise_ops_default()};
  if (kernel_isa_supported(KernelIsa::kAvx2)) tables.push_back(&detail::elementwise_ops_avx2());
  if (kernel_isa_supported(KernelIsa::kAvx512)) tables.push_back(&detail::elementwise_ops_avx512());
  for (const detail::ElementwiseOps* ops : tables) {
    for (int64_t n : kLengths) {
      const auto x = inputs(n, 60 + n, -9.0f, 9.0f, /*with_neg_inf=*/true);
      const auto y = inputs(n, 61 + n, -1.0f, 1.0f);
      const float shift = detail::max_of(x.data(), n);
      const std::string at = std::string(kernel_isa_name(ops->isa)) + " n=" + std::to_string(n);
      float got = ops->max_of(x.data(), n), want = shift;
      EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << "max_of " << at;
      got = ops->dot(x.data() + (n > 3 ? 4 : 0), y.data(), n > 3 ? n - 4 : n);
      want = detail::dot(x.data() + (n > 3 ? 4 : 0), y.data(), n > 3 ? n - 4 : n);
      EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << "dot " << at;
      const double sg = ops->sum_exp_shifted(x.data(), shift, n);
      const double sw = detail::sum_exp_shifted(x.data(), shift, n);
      EXPECT_EQ(std::memcmp(&sg, &sw, 8), 0)
          << "sum_exp_shifted " << at << ": " << sg << " vs " << sw;
      std::vector<float> eg(n), ew(n);
      ops->exp_shifted_scaled(eg.data(), x.data(), shift, 1.0f, n);
      detail::exp_shifted(ew.data(), x.data(), shift, n);
      EXPECT_EQ(std::memcmp(eg.data(), ew.data(), n * sizeof(float)), 0) << "exp_shifted " << at;
    }
  }
}

TEST(KernelIsa, NamesAndSelection) {
  for (KernelIsa isa : {KernelIsa::kDefault, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    KernelIsa parsed;
    ASSERT_TRUE(parse_kernel_isa(kernel_isa_name(isa), &parsed));
    EXPECT_EQ(parsed, isa);
  }
  KernelIsa parsed;
  EXPECT_FALSE(parse_kernel_isa("avx512f", &parsed));
  EXPECT_TRUE(kernel_isa_supported(KernelIsa::kDefault));
  EXPECT_TRUE(kernel_isa_supported(best_kernel_isa()));
  if (std::getenv("BRIGADE_ISA") == nullptr) {
    // Unforced, the kernels run on the widest ISA the CPU has.
    EXPECT_EQ(elementwise_isa(), best_kernel_isa());
    EXPECT_EQ(
        elementwise_isa_description(),
        std::string("element-wise ") + kernel_isa_name(best_kernel_isa()) + " (best of this CPU)");
  }
  for (KernelIsa isa : {KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    if (!kernel_isa_supported(isa)) {
      EXPECT_THROW(set_elementwise_isa(isa), std::exception);
    }
  }
}

std::string run_command(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  pclose(pipe);
  return out;
}

TEST(KernelIsa, EnvironmentForcesTheDefaultPath) {
  const std::string best = kernel_isa_name(best_kernel_isa());
  const std::string forced = run_command("BRIGADE_ISA=default " BRIGADE_BINARY " --version");
  EXPECT_NE(forced.find("element-wise default (BRIGADE_ISA=default"), std::string::npos) << forced;
  const std::string plain = run_command("env -u BRIGADE_ISA " BRIGADE_BINARY " --version");
  EXPECT_NE(plain.find("element-wise " + best + " (best of this CPU)"), std::string::npos) << plain;
  const std::string bad = run_command("BRIGADE_ISA=sse9 " BRIGADE_BINARY " --version");
  EXPECT_NE(bad.find("BRIGADE_ISA=sse9 is not default, avx2 or avx512: ignored"), std::string::npos)
      << bad;
}

// A weak symbol in an ISA's object file (an inline function or template instantiation of a
// shared header) could be the copy the linker keeps for every caller, putting AVX-512
// instructions on the baseline path. Each file must define only its table's accessor.
TEST(KernelIsa, IsaObjectsDefineOnlyTheirTable) {
  const std::string lib = BRIGADE_KERNELS_ARCHIVE;
  const std::string listing = run_command("nm --defined-only -C " + lib + " 2>&1");
  ASSERT_NE(listing.find("elementwise_avx512.cc.o:"), std::string::npos) << lib << "\n"
                                                                         << listing.substr(0, 500);
  for (const char* isa : {"default", "avx2", "avx512"}) {
    const std::string member = std::string("\nelementwise_") + isa + ".cc.o:\n";
    const size_t begin = listing.find(member);
    ASSERT_NE(begin, std::string::npos) << member;
    const size_t end = listing.find("\n\n", begin + member.size());
    const std::string symbols = listing.substr(begin + member.size(), end - begin - member.size());
    int tables = 0;
    size_t pos = 0;
    while (pos < symbols.size()) {
      size_t eol = symbols.find('\n', pos);
      if (eol == std::string::npos) eol = symbols.size();
      const std::string line = symbols.substr(pos, eol - pos);
      pos = eol + 1;
      if (line.size() < 19) continue;
      const char type = line[17];
      const std::string name = line.substr(19);
      if (type == 'T' && name == std::string("brigade::detail::elementwise_ops_") + isa + "()") {
        ++tables;
        continue;
      }
      // Local symbols (lower case t, r, d, b) cannot be shared with another file.
      EXPECT_TRUE(type == 't' || type == 'r' || type == 'd' || type == 'b')
          << "elementwise_" << isa << ".cc.o defines '" << line << "'";
    }
    EXPECT_EQ(tables, 1) << symbols;
  }
}

}  // namespace
}  // namespace brigade
