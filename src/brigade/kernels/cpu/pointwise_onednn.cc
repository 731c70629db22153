// GELU and LayerNorm on oneDNN (eltwise_gelu_tanh, layer_normalization), forward and backward,
// with the contracts of gelu.h and layernorm.h. bench_onednn_ops measured them 1.6-3.7x faster
// than the hand-written kernels on the model's shapes, backward included (bench/RESULTS.md).
//
// Shapes. A primitive is compiled for a fixed size, and the sizes these kernels see vary (an
// expert's rows, generation's context), so work goes in chunks of a few fixed sizes: GELU in
// runs of 65536, 4096 and 256 elements (largest first), LayerNorm in blocks of 256 and 16 rows.
// The last piece, shorter than the smallest size, is copied into a zero-padded scratch block,
// computed there and copied back. So there are at most three primitives per direction for GELU
// and two per direction and width C for LayerNorm, each made on first use and kept per thread
// with its memory objects (rebound per call) and scratch blocks; nothing is allocated after.
// Every element is computed by the same vector code wherever its chunk falls, so results do not
// depend on N beyond the padded tail's copy.
//
// Contracts that differ from oneDNN's:
//   * backward kernels accumulate (+=); oneDNN's backward primitives write. Each chunk's result
//     is written into a scratch block (256 KiB at most, so it stays in cache) and added.
//   * layernorm_forward saves rstd, oneDNN the variance: forward writes the variance into rstd and
//     turns it into 1 / sqrt(var + eps) (the hand-written kernel's formula); backward turns each
//     block's rstd back into 1 / rstd^2 - eps for oneDNN, which recomputes 1 / sqrt(var + eps)
//     from it (the same rstd within a rounding).
//   * oneDNN 2.6's layer-norm backward refuses to execute without the shift, which enters no
//     gradient: it gets a block of zeros.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "brigade/kernels/cpu/backend_registry.h"
#include "brigade/kernels/cpu/onednn_thread.h"

namespace brigade::detail {

namespace {

using dnnl::memory;
constexpr memory::data_type kF32 = memory::data_type::f32;
constexpr float kLayerNormEps = 1e-5f;  // as layernorm.cc
constexpr int64_t kGeluSizes[] = {65536, 4096, 256};
constexpr int64_t kLayerNormRows[] = {256, 16};

void execute(const dnnl::primitive& p, OneDnnThread& t, std::initializer_list<dnnl_exec_arg_t> a,
             const char* what) {
  check_dnnl(dnnl_primitive_execute(p.get(), t.stream.get(), static_cast<int>(a.size()), a.begin()),
             what);
}

void bind(const memory& m, const float* p) {
  m.set_data_handle(const_cast<float*>(p));
}

void add_into(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

// The scratchpad of a primitive made with a user-managed scratchpad, allocated with it.
struct Scratchpad {
  std::vector<char> bytes;
  memory mem;
  Scratchpad(const dnnl::primitive_desc_base& pd, const dnnl::engine& eng) {
    const memory::desc d = pd.scratchpad_desc();
    bytes.resize(d.get_size());
    mem = memory(d, eng, bytes.empty() ? DNNL_MEMORY_NONE : bytes.data());
    count_onednn_primitive(static_cast<int64_t>(bytes.size()));
  }
};

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// ---- GELU ----

struct Gelu {
  int64_t n;
  dnnl::eltwise_forward fwd;
  dnnl::eltwise_backward bwd;
  std::unique_ptr<Scratchpad> fwd_pad, bwd_pad;
  memory src, dst, diff_dst, diff_src;  // no data of their own: bound per call

  Gelu(int64_t size, const dnnl::engine& eng) : n(size) {
    const memory::desc md({n}, kF32, memory::format_tag::a);
    const dnnl::primitive_attr attr = user_scratchpad();
    dnnl::eltwise_forward::primitive_desc f(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_gelu_tanh, md, 0.f, 0.f}, attr,
        eng);
    dnnl::eltwise_backward::primitive_desc b({dnnl::algorithm::eltwise_gelu_tanh, md, md, 0.f, 0.f},
                                             attr, eng, f);
    fwd = dnnl::eltwise_forward(f);
    bwd = dnnl::eltwise_backward(b);
    fwd_pad = std::make_unique<Scratchpad>(f, eng);
    bwd_pad = std::make_unique<Scratchpad>(b, eng);
    src = memory(md, eng, DNNL_MEMORY_NONE);
    dst = memory(md, eng, DNNL_MEMORY_NONE);
    diff_dst = memory(md, eng, DNNL_MEMORY_NONE);
    diff_src = memory(md, eng, DNNL_MEMORY_NONE);
  }
};

struct GeluState {
  int threads = -1;
  std::vector<std::unique_ptr<Gelu>> sizes;  // as kGeluSizes
  std::vector<float> out, in, grad;          // kGeluSizes[0]: backward's result, padded tail
};

GeluState& gelu_state(OneDnnThread& t) {
  thread_local GeluState s;
  if (s.threads != t.threads) {
    s.sizes.clear();
    for (int64_t n : kGeluSizes) s.sizes.push_back(std::make_unique<Gelu>(n, t.engine));
    s.out.assign(kGeluSizes[0], 0.0f);
    s.in.assign(kGeluSizes[0], 0.0f);
    s.grad.assign(kGeluSizes[0], 0.0f);
    s.threads = t.threads;
  }
  return s;
}

void gelu_fwd(Gelu& g, OneDnnThread& t, float* out, const float* inp) {
  bind(g.src, inp);
  bind(g.dst, out);
  execute(g.fwd, t,
          {{DNNL_ARG_SRC, g.src.get()},
           {DNNL_ARG_DST, g.dst.get()},
           {DNNL_ARG_SCRATCHPAD, g.fwd_pad->mem.get()}},
          "gelu forward");
}

// dinp (n) += gelu'(inp) dout, through the state's scratch block.
void gelu_bwd(Gelu& g, GeluState& s, OneDnnThread& t, float* dinp, const float* inp,
              const float* dout, int64_t valid) {
  bind(g.src, inp);
  bind(g.diff_dst, dout);
  bind(g.diff_src, s.out.data());
  execute(g.bwd, t,
          {{DNNL_ARG_SRC, g.src.get()},
           {DNNL_ARG_DIFF_DST, g.diff_dst.get()},
           {DNNL_ARG_DIFF_SRC, g.diff_src.get()},
           {DNNL_ARG_SCRATCHPAD, g.bwd_pad->mem.get()}},
          "gelu backward");
  add_into(dinp, s.out.data(), valid);
}

// ---- LayerNorm ----

struct LayerNorm {
  int64_t rows, C;
  dnnl::layer_normalization_forward fwd;
  dnnl::layer_normalization_backward bwd;
  std::unique_ptr<Scratchpad> fwd_pad, bwd_pad;
  memory src, dst, mean, var, scale, shift, diff_dst, diff_src, diff_scale, diff_shift;

  LayerNorm(int64_t r, int64_t c, const dnnl::engine& eng) : rows(r), C(c) {
    const memory::desc md({rows, C}, kF32, memory::format_tag::ab);
    const memory::desc cd({C}, kF32, memory::format_tag::a);
    const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    const dnnl::primitive_attr attr = user_scratchpad();
    dnnl::layer_normalization_forward::primitive_desc f(
        {dnnl::prop_kind::forward_training, md, kLayerNormEps, flags}, attr, eng);
    dnnl::layer_normalization_backward::primitive_desc b(
        {dnnl::prop_kind::backward, md, md, kLayerNormEps, flags}, attr, eng, f);
    fwd = dnnl::layer_normalization_forward(f);
    bwd = dnnl::layer_normalization_backward(b);
    fwd_pad = std::make_unique<Scratchpad>(f, eng);
    bwd_pad = std::make_unique<Scratchpad>(b, eng);
    for (memory* m : {&src, &dst, &diff_dst, &diff_src}) *m = memory(md, eng, DNNL_MEMORY_NONE);
    mean = memory(f.mean_desc(), eng, DNNL_MEMORY_NONE);
    var = memory(f.variance_desc(), eng, DNNL_MEMORY_NONE);
    for (memory* m : {&scale, &shift, &diff_scale, &diff_shift}) {
      *m = memory(cd, eng, DNNL_MEMORY_NONE);
    }
  }
};

// Per width C: the row blocks' primitives and the scratch blocks (sized for the largest).
struct LayerNormState {
  std::vector<std::unique_ptr<LayerNorm>> blocks;  // as kLayerNormRows
  std::vector<float> x, y, dy, dx, mean, var;      // rows x C, rows x C, ..., rows, rows
  std::vector<float> dscale, dshift, zeros;        // C each
};

LayerNormState& layernorm_state(OneDnnThread& t, int64_t C) {
  thread_local std::map<std::pair<int, int64_t>, LayerNormState> states;
  LayerNormState& s = states[{t.threads, C}];
  if (s.blocks.empty()) {
    for (int64_t r : kLayerNormRows)
      s.blocks.push_back(std::make_unique<LayerNorm>(r, C, t.engine));
    const int64_t R = kLayerNormRows[0];
    for (auto* v : {&s.x, &s.y, &s.dy, &s.dx}) v->assign(R * C, 0.0f);
    for (auto* v : {&s.mean, &s.var}) v->assign(R, 0.0f);
    for (auto* v : {&s.dscale, &s.dshift, &s.zeros}) v->assign(C, 0.0f);
  }
  return s;
}

void ln_fwd(LayerNorm& l, OneDnnThread& t, float* out, float* mean, float* var, const float* inp,
            const float* weight, const float* bias) {
  bind(l.src, inp);
  bind(l.dst, out);
  bind(l.mean, mean);
  bind(l.var, var);
  bind(l.scale, weight);
  bind(l.shift, bias);
  execute(l.fwd, t,
          {{DNNL_ARG_SRC, l.src.get()},
           {DNNL_ARG_DST, l.dst.get()},
           {DNNL_ARG_MEAN, l.mean.get()},
           {DNNL_ARG_VARIANCE, l.var.get()},
           {DNNL_ARG_SCALE, l.scale.get()},
           {DNNL_ARG_SHIFT, l.shift.get()},
           {DNNL_ARG_SCRATCHPAD, l.fwd_pad->mem.get()}},
          "layer normalization forward");
}

// The block's gradients: dx into s.dx, dscale and dshift into s.dscale and s.dshift.
void ln_bwd(LayerNorm& l, LayerNormState& s, OneDnnThread& t, const float* dout, const float* inp,
            const float* weight, const float* mean, const float* var) {
  bind(l.src, inp);
  bind(l.mean, mean);
  bind(l.var, var);
  bind(l.diff_dst, dout);
  bind(l.scale, weight);
  bind(l.shift, s.zeros.data());
  bind(l.diff_src, s.dx.data());
  bind(l.diff_scale, s.dscale.data());
  bind(l.diff_shift, s.dshift.data());
  execute(l.bwd, t,
          {{DNNL_ARG_SRC, l.src.get()},
           {DNNL_ARG_MEAN, l.mean.get()},
           {DNNL_ARG_VARIANCE, l.var.get()},
           {DNNL_ARG_DIFF_DST, l.diff_dst.get()},
           {DNNL_ARG_SCALE, l.scale.get()},
           {DNNL_ARG_SHIFT, l.shift.get()},
           {DNNL_ARG_DIFF_SRC, l.diff_src.get()},
           {DNNL_ARG_DIFF_SCALE, l.diff_scale.get()},
           {DNNL_ARG_DIFF_SHIFT, l.diff_shift.get()},
           {DNNL_ARG_SCRATCHPAD, l.bwd_pad->mem.get()}},
          "layer normalization backward");
}

}  // namespace

void onednn_gelu_forward(float* out, const float* inp, int64_t N) {
  OneDnnThread& t = onednn_thread();
  GeluState& s = gelu_state(t);
  int64_t i = 0;
  for (const auto& g : s.sizes) {
    for (; N - i >= g->n; i += g->n) gelu_fwd(*g, t, out + i, inp + i);
  }
  if (i < N) {  // the tail, shorter than the smallest size: through a zero-padded block
    Gelu& g = *s.sizes.back();
    const int64_t rest = N - i;
    std::fill(std::copy(inp + i, inp + N, s.in.begin()), s.in.begin() + g.n, 0.0f);
    gelu_fwd(g, t, s.grad.data(), s.in.data());
    std::copy(s.grad.begin(), s.grad.begin() + rest, out + i);
  }
}

void onednn_gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) {
  OneDnnThread& t = onednn_thread();
  GeluState& s = gelu_state(t);
  int64_t i = 0;
  for (const auto& g : s.sizes) {
    for (; N - i >= g->n; i += g->n) gelu_bwd(*g, s, t, dinp + i, inp + i, dout + i, g->n);
  }
  if (i < N) {
    Gelu& g = *s.sizes.back();
    std::fill(std::copy(inp + i, inp + N, s.in.begin()), s.in.begin() + g.n, 0.0f);
    std::fill(std::copy(dout + i, dout + N, s.grad.begin()), s.grad.begin() + g.n, 0.0f);
    gelu_bwd(g, s, t, dinp + i, s.in.data(), s.grad.data(), N - i);
  }
}

void onednn_layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                              const float* weight, const float* bias, int64_t N, int64_t C) {
  OneDnnThread& t = onednn_thread();
  LayerNormState& s = layernorm_state(t, C);
  int64_t r = 0;
  for (const auto& l : s.blocks) {
    for (; N - r >= l->rows; r += l->rows) {
      ln_fwd(*l, t, out + r * C, mean + r, rstd + r, inp + r * C, weight, bias);
    }
  }
  if (r < N) {  // the last rows: through zero-padded blocks
    LayerNorm& l = *s.blocks.back();
    const int64_t rest = N - r;
    std::fill(std::copy(inp + r * C, inp + N * C, s.x.begin()), s.x.begin() + l.rows * C, 0.0f);
    ln_fwd(l, t, s.y.data(), s.mean.data(), s.var.data(), s.x.data(), weight, bias);
    std::copy(s.y.begin(), s.y.begin() + rest * C, out + r * C);
    std::copy(s.mean.begin(), s.mean.begin() + rest, mean + r);
    std::copy(s.var.begin(), s.var.begin() + rest, rstd + r);
  }
  for (int64_t n = 0; n < N; ++n) rstd[n] = 1.0f / std::sqrt(rstd[n] + kLayerNormEps);
}

void onednn_layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, const float* mean,
                               const float* rstd, int64_t N, int64_t C) {
  OneDnnThread& t = onednn_thread();
  LayerNormState& s = layernorm_state(t, C);
  const auto to_variance = [&](int64_t r, int64_t rows) {
    for (int64_t i = 0; i < rows; ++i)
      s.var[i] = 1.0f / (rstd[r + i] * rstd[r + i]) - kLayerNormEps;
  };
  const auto accumulate = [&](int64_t r, int64_t rows) {
    add_into(dinp + r * C, s.dx.data(), rows * C);
    add_into(dweight, s.dscale.data(), C);
    add_into(dbias, s.dshift.data(), C);
  };
  int64_t r = 0;
  for (const auto& l : s.blocks) {
    for (; N - r >= l->rows; r += l->rows) {
      to_variance(r, l->rows);
      ln_bwd(*l, s, t, dout + r * C, inp + r * C, weight, mean + r, s.var.data());
      accumulate(r, l->rows);
    }
  }
  if (r < N) {  // padding rows have dout = 0, so they add nothing to dweight and dbias
    LayerNorm& l = *s.blocks.back();
    const int64_t rest = N - r;
    std::fill(std::copy(inp + r * C, inp + N * C, s.x.begin()), s.x.begin() + l.rows * C, 0.0f);
    std::fill(std::copy(dout + r * C, dout + N * C, s.dy.begin()), s.dy.begin() + l.rows * C, 0.0f);
    std::fill(std::copy(mean + r, mean + N, s.mean.begin()), s.mean.begin() + l.rows, 0.0f);
    to_variance(r, rest);
    std::fill(s.var.begin() + rest, s.var.begin() + l.rows, 1.0f);
    ln_bwd(l, s, t, s.dy.data(), s.x.data(), weight, s.mean.data(), s.var.data());
    accumulate(r, rest);
  }
}

}  // namespace brigade::detail
