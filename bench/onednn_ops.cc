// The non-GEMM ops of a GPT step, hand-written kernel against oneDNN's primitive, side by side:
// GELU (eltwise_gelu_tanh), LayerNorm (layer_normalization) and row softmax (softmax_v2), each
// forward and backward, on the shapes the model runs (rows = B T tokens; GELU over the MLP's
// B T x 4C activations, LayerNorm over C, softmax over the vocabulary of the fused cross-entropy
// and over a router's experts). Which one each op keeps is decided from this (bench/RESULTS.md).
//
// The comparison is of what the model would run, so the kernels' contracts count:
//   * backward kernels accumulate (+=) into their gradients (matmul.h); oneDNN's backward
//     primitives write theirs, so the oneDNN column of a backward op includes adding its output
//     into the gradient (one pass); the write-only time is printed beside it;
//   * layernorm_forward saves mean and rstd; oneDNN saves mean and variance, and its backward
//     takes the variance: both are kept by the oneDNN side, nothing is converted.
// Primitives and memory objects are created before timing; only execute is timed. Rounds
// alternate hand-written and oneDNN, and the medians are reported with their ratio. Both sides
// are checked against each other (max |difference|), so a fast wrong answer shows. A second table
// times the kernels of kernels/cpu themselves under each backend: what the model runs (oneDNN's
// in fixed-size chunks, pointwise_onednn.cc).
#include <fmt/format.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <dnnl.hpp>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "brigade/kernels/cpu/gelu.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/kernels/cpu/layernorm.h"
#include "brigade/kernels/cpu/softmax.h"
#include "brigade/monitor/timer.h"

namespace brigade {
namespace {

using dnnl::memory;
using Args = std::unordered_map<int, memory>;

struct Options {
  int64_t rows = 2048;  // B T
  int64_t channels = 256;
  int64_t vocab = 256;
  int64_t experts = 8;
  int reps = 30;
  int threads = 1;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<float> filled(int64_t n, uint64_t key, float scale = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t x = key * 0x9E3779B97F4A7C15ull + 1;
  for (auto& f : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    f = scale * (static_cast<float>(x >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f);
  }
  return v;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

void add_into(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

struct Row {
  std::string op;
  double hand_ms, dnnl_ms, dnnl_write_ms;  // dnnl_write_ms < 0: not applicable
  double diff;
};

// Times hand() and dnnl() alternately, reps times each, after one untimed call of each.
Row compare(const std::string& op, int reps, const std::function<void()>& hand,
            const std::function<void()>& dnnl_run, const std::function<void()>& dnnl_write) {
  hand();
  dnnl_run();
  if (dnnl_write) dnnl_write();
  std::vector<double> h, d, w;
  for (int r = 0; r < reps; ++r) {
    Stopwatch a;
    hand();
    h.push_back(a.seconds());
    Stopwatch b;
    dnnl_run();
    d.push_back(b.seconds());
    if (dnnl_write) {
      Stopwatch c;
      dnnl_write();
      w.push_back(c.seconds());
    }
  }
  return Row{op, 1e3 * median(h), 1e3 * median(d), dnnl_write ? 1e3 * median(w) : -1.0, 0.0};
}

int run(const Options& o) {
  omp_set_num_threads(o.threads);  // oneDNN's threads (the Debian build is OpenMP)
  // The "hand" column calls the kernels of kernels/cpu, which dispatch to the selected backend:
  // the OpenBLAS one keeps brigade's own GELU, LayerNorm and softmax.
  set_gemm_backend(GemmBackend::kOpenBlas);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const memory::data_type f32 = memory::data_type::f32;
  std::vector<Row> rows;
  const int64_t N = o.rows, C = o.channels;

  // ---- GELU over (N, 4C) ----
  {
    const int64_t n = N * 4 * C;
    auto x = filled(n, 1, 3.0f), dy = filled(n, 2);
    std::vector<float> y_hand(n), y_dnnl(n), dx_hand(n), dx_dnnl(n), tmp(n);
    const memory::desc md({n}, f32, memory::format_tag::a);
    dnnl::eltwise_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_gelu_tanh, md, 0.f, 0.f}, eng);
    dnnl::eltwise_backward::primitive_desc bpd(
        {dnnl::algorithm::eltwise_gelu_tanh, md, md, 0.f, 0.f}, eng, fpd);
    dnnl::eltwise_forward fwd(fpd);
    dnnl::eltwise_backward bwd(bpd);
    memory mx(md, eng, x.data()), my(md, eng, y_dnnl.data()), mdy(md, eng, dy.data()),
        mtmp(md, eng, tmp.data());
    Row f = compare(
        "gelu_forward", o.reps, [&] { gelu_forward(y_hand.data(), x.data(), n); },
        [&] {
          fwd.execute(strm, Args{{DNNL_ARG_SRC, mx}, {DNNL_ARG_DST, my}});
        },
        nullptr);
    f.diff = max_diff(y_hand, y_dnnl);
    rows.push_back(f);
    Row b = compare(
        "gelu_backward (+=)", o.reps,
        [&] { gelu_backward(dx_hand.data(), x.data(), dy.data(), n); },
        [&] {
          bwd.execute(
              strm, Args{{DNNL_ARG_SRC, mx}, {DNNL_ARG_DIFF_DST, mdy}, {DNNL_ARG_DIFF_SRC, mtmp}});
          add_into(dx_dnnl.data(), tmp.data(), n);
        },
        [&] {
          bwd.execute(
              strm, Args{{DNNL_ARG_SRC, mx}, {DNNL_ARG_DIFF_DST, mdy}, {DNNL_ARG_DIFF_SRC, mtmp}});
        });
    // Both sides accumulated reps + 1 times (compare's untimed call and the timed ones).
    b.diff = max_diff(dx_hand, dx_dnnl) / (o.reps + 1);
    rows.push_back(b);
  }

  // ---- LayerNorm over (N, C) ----
  {
    auto x = filled(N * C, 3, 2.0f), w = filled(C, 4), bias = filled(C, 5), dy = filled(N * C, 6);
    std::vector<float> y_hand(N * C), y_dnnl(N * C), mean(N), rstd(N), mean_d(N), var_d(N);
    std::vector<float> dx_hand(N * C), dw_hand(C), db_hand(C), dx_dnnl(N * C), dw_dnnl(C),
        db_dnnl(C), tdx(N * C), tdw(C), tdb(C);
    const memory::desc md({N, C}, f32, memory::format_tag::ab);
    const memory::desc cd({C}, f32, memory::format_tag::a);
    const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    dnnl::layer_normalization_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, md, 1e-5f, flags}, eng);
    dnnl::layer_normalization_backward::primitive_desc bpd(
        {dnnl::prop_kind::backward, md, md, 1e-5f, flags}, eng, fpd);
    dnnl::layer_normalization_forward fwd(fpd);
    dnnl::layer_normalization_backward bwd(bpd);
    memory mx(md, eng, x.data()), my(md, eng, y_dnnl.data()), mw(cd, eng, w.data()),
        mb(cd, eng, bias.data()), mmean(fpd.mean_desc(), eng, mean_d.data()),
        mvar(fpd.variance_desc(), eng, var_d.data()), mdy(md, eng, dy.data()),
        mtdx(md, eng, tdx.data()), mtdw(cd, eng, tdw.data()), mtdb(cd, eng, tdb.data());
    Row f = compare(
        "layernorm_forward", o.reps,
        [&] {
          layernorm_forward(y_hand.data(), mean.data(), rstd.data(), x.data(), w.data(),
                            bias.data(), N, C);
        },
        [&] {
          fwd.execute(strm, Args{{DNNL_ARG_SRC, mx},
                                 {DNNL_ARG_DST, my},
                                 {DNNL_ARG_MEAN, mmean},
                                 {DNNL_ARG_VARIANCE, mvar},
                                 {DNNL_ARG_SCALE, mw},
                                 {DNNL_ARG_SHIFT, mb}});
        },
        nullptr);
    f.diff = max_diff(y_hand, y_dnnl);
    rows.push_back(f);
    // oneDNN 2.6's backward also wants the shift when use_shift is set (it fails to execute
    // without it, though the shift does not enter any gradient).
    const Args bargs{
        {DNNL_ARG_SRC, mx},        {DNNL_ARG_MEAN, mmean},      {DNNL_ARG_VARIANCE, mvar},
        {DNNL_ARG_DIFF_DST, mdy},  {DNNL_ARG_SCALE, mw},        {DNNL_ARG_SHIFT, mb},
        {DNNL_ARG_DIFF_SRC, mtdx}, {DNNL_ARG_DIFF_SCALE, mtdw}, {DNNL_ARG_DIFF_SHIFT, mtdb}};
    Row b = compare(
        "layernorm_backward (+=)", o.reps,
        [&] {
          layernorm_backward(dx_hand.data(), dw_hand.data(), db_hand.data(), dy.data(), x.data(),
                             w.data(), mean.data(), rstd.data(), N, C);
        },
        [&] {
          bwd.execute(strm, bargs);
          add_into(dx_dnnl.data(), tdx.data(), N * C);
          add_into(dw_dnnl.data(), tdw.data(), C);
          add_into(db_dnnl.data(), tdb.data(), C);
        },
        [&] { bwd.execute(strm, bargs); });
    b.diff = max_diff(dx_hand, dx_dnnl) / (o.reps + 1);
    rows.push_back(b);
  }

  // ---- Row softmax over (N, V): the vocabulary and a router's experts ----
  for (const int64_t V : {o.vocab, o.experts}) {
    auto logits = filled(N * V, 7 + V, 4.0f), dp = filled(N * V, 8 + V);
    std::vector<float> p_hand(N * V), p_dnnl(N * V), dl_hand(N * V), dl_dnnl(N * V), tmp(N * V);
    const memory::desc md({N, V}, f32, memory::format_tag::ab);
    dnnl::softmax_v2_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::softmax_accurate, md, md, 1}, eng);
    dnnl::softmax_v2_backward::primitive_desc bpd(
        {dnnl::algorithm::softmax_accurate, md, md, md, 1}, eng, fpd);
    dnnl::softmax_v2_forward fwd(fpd);
    dnnl::softmax_v2_backward bwd(bpd);
    memory ml(md, eng, logits.data()), mp(md, eng, p_dnnl.data()), mdp(md, eng, dp.data()),
        mtmp(md, eng, tmp.data());
    Row f = compare(
        fmt::format("softmax_forward (V={})", V), o.reps,
        [&] { softmax_forward(p_hand.data(), logits.data(), N, V); },
        [&] {
          fwd.execute(strm, Args{{DNNL_ARG_SRC, ml}, {DNNL_ARG_DST, mp}});
        },
        nullptr);
    f.diff = max_diff(p_hand, p_dnnl);
    rows.push_back(f);
    Row b = compare(
        fmt::format("softmax_backward (V={}, +=)", V), o.reps,
        [&] { softmax_backward(dl_hand.data(), p_hand.data(), dp.data(), N, V); },
        [&] {
          bwd.execute(
              strm, Args{{DNNL_ARG_DST, mp}, {DNNL_ARG_DIFF_DST, mdp}, {DNNL_ARG_DIFF_SRC, mtmp}});
          add_into(dl_dnnl.data(), tmp.data(), N * V);
        },
        [&] {
          bwd.execute(
              strm, Args{{DNNL_ARG_DST, mp}, {DNNL_ARG_DIFF_DST, mdp}, {DNNL_ARG_DIFF_SRC, mtmp}});
        });
    b.diff = max_diff(dl_hand, dl_dnnl) / (o.reps + 1);
    rows.push_back(b);
  }

  // ---- The kernels as brigade calls them: each backend's gelu_* / layernorm_* ----
  // (train.kernels = "onednn" runs them through pointwise_onednn.cc, in fixed-size chunks.)
  std::vector<Row> kernels;
  {
    const int64_t n = N * 4 * C;
    auto x = filled(n, 1, 3.0f), dy = filled(n, 2), lx = filled(N * C, 3, 2.0f),
         ldy = filled(N * C, 6), w = filled(C, 4), bias = filled(C, 5);
    std::vector<float> y(n), dx(n), ly(N * C), mean(N), rstd(N), ldx(N * C), dw(C), db(C);
    const auto on = [](GemmBackend b, const std::function<void()>& f) {
      return [b, f] {
        set_gemm_backend(b);
        f();
        set_gemm_backend(GemmBackend::kOpenBlas);
      };
    };
    const std::function<void()> ops[] = {
        [&] { gelu_forward(y.data(), x.data(), n); },
        [&] { gelu_backward(dx.data(), x.data(), dy.data(), n); },
        [&] {
          layernorm_forward(ly.data(), mean.data(), rstd.data(), lx.data(), w.data(), bias.data(),
                            N, C);
        },
        [&] {
          layernorm_backward(ldx.data(), dw.data(), db.data(), ldy.data(), lx.data(), w.data(),
                             mean.data(), rstd.data(), N, C);
        }};
    const char* names[] = {"gelu_forward", "gelu_backward", "layernorm_forward",
                           "layernorm_backward"};
    for (int k = 0; k < 4; ++k) {
      kernels.push_back(compare(names[k], o.reps, on(GemmBackend::kOpenBlas, ops[k]),
                                on(GemmBackend::kOneDnn, ops[k]), nullptr));
    }
  }

  const dnnl_version_t* v = dnnl_version();
  fmt::print("oneDNN {}.{}.{} ({} thread(s)), rows {}, C {}, median of {} alternating reps each\n",
             v->major, v->minor, v->patch, o.threads, N, C, o.reps);
  fmt::print("{:<30} {:>10} {:>10} {:>14} {:>9} {:>11}\n", "op", "hand ms", "oneDNN ms",
             "(write only)", "hand/dnnl", "max |diff|");
  for (const Row& r : rows) {
    fmt::print("{:<30} {:>10.3f} {:>10.3f} {:>14} {:>8.2f}x {:>11.2e}\n", r.op, r.hand_ms,
               r.dnnl_ms, r.dnnl_write_ms < 0 ? "" : fmt::format("{:.3f}", r.dnnl_write_ms),
               r.hand_ms / r.dnnl_ms, r.diff);
  }
  fmt::print("\nas the kernels run in the model (kernels/cpu, each backend's path):\n");
  fmt::print("{:<30} {:>10} {:>10} {:>9}\n", "kernel", "openblas", "onednn", "ratio");
  for (const Row& r : kernels) {
    fmt::print("{:<30} {:>10.3f} {:>10.3f} {:>8.2f}x\n", r.op, r.hand_ms, r.dnnl_ms,
               r.hand_ms / r.dnnl_ms);
  }
  return 0;
}

}  // namespace
}  // namespace brigade

int main(int argc, char** argv) {
  brigade::Options opt;
  CLI::App app{"GELU, LayerNorm, softmax: hand-written kernels vs oneDNN primitives"};
  app.add_option("--rows", opt.rows, "tokens B T")->check(CLI::PositiveNumber);
  app.add_option("--channels", opt.channels, "d_model C (GELU runs over 4C)")
      ->check(CLI::PositiveNumber);
  app.add_option("--vocab", opt.vocab, "softmax row length (cross-entropy)")
      ->check(CLI::PositiveNumber);
  app.add_option("--experts", opt.experts, "softmax row length (router)")
      ->check(CLI::PositiveNumber);
  app.add_option("--reps", opt.reps, "timed reps per op and side")->check(CLI::PositiveNumber);
  app.add_option("--threads", opt.threads, "oneDNN threads")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  return brigade::run(opt);
}
