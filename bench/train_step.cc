// Single-process training-step benchmark, on each GEMM backend (and operand precision: an arm
// "onednn:bf16" runs train.precision = "bf16") side by side: how fast is one GPT training step
// (forward, backward, gradient clipping, AdamW) on oneDNN and on OpenBLAS,
// how fast are the step's GEMMs alone on each, and how close does the step come to its GEMMs?
//
// The GEMM reference is the mix of the step itself: every linear-layer product the model runs
// in one step (forward out = x W^T, backward dx += dy W and dW += dy^T x, for c_attn,
// attn.c_proj, mlp.c_fc and mlp.c_proj of each layer and the tied head), issued as gemm() calls
// (kernels/cpu/gemm_backend.h) on buffers of the same shapes, with the backend of the arm. Its
// GFLOP/s is what the step would reach if everything it does ran as fast as that library runs
// its largest products. The machine is shared and noisy, so everything is interleaved round by
// round (for each backend: one training step, then one GEMM set; each backend trains its own
// copy of the model from the same initialisation on the same batches) and the headline figures
// are medians of per-round ratios. An arm may also name the ISA of the element-wise kernels
// ("onednn@default", "openblas@avx512": kernels/cpu/kernel_isa.h), so the x86-64-v2 path and the
// dispatched one run side by side in one process.
//
// Achieved FLOP/s counts Model::flops_per_example (6 N T + 12 L C T^2 per sequence, PaLM's
// formula: N = parameters except wpe; attention without a causal discount) over the wall
// time of the step.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/kernels/cpu/gemm_onednn.h"
#include "brigade/kernels/cpu/kernel_isa.h"
#include "brigade/model/gpt.h"
#include "brigade/monitor/op_profiler.h"
#include "brigade/monitor/timer.h"
#include "brigade/optim/grad_clip.h"
#include "brigade/optim/optimizer.h"
#include "brigade/runtime/config.h"
#include "brigade/runtime/run_folder.h"
#include "brigade/tensor/rng.h"
#include "brigade/train/training_data.h"

namespace brigade {
namespace {

struct Options {
  std::string config = std::string(BRIGADE_SOURCE_DIR) + "/configs/bench-small.toml";
  int64_t steps = 10;
  int64_t warmup = 2;
  int threads = 1;
  bool random_tokens = false;
  std::vector<std::string> backends = {"onednn", "openblas"};
};

// One linear layer's three GEMMs (row-major, exactly as kernels/cpu/matmul.cc issues them).
struct GemmShape {
  std::string name;  // "mlp.c_fc (2048x256 -> 1024)"
  int64_t N, C, OC;  // inp (N,C), weight (OC,C)
  int64_t count;     // how many such layers one step runs
  double seconds = 0;
  double flops() const { return 6.0 * static_cast<double>(N * C * OC * count); }
};

// Buffers big enough for every shape; filled once with small values (no denormals).
class GemmSet {
 public:
  explicit GemmSet(std::vector<GemmShape> shapes) : shapes_(std::move(shapes)) {
    int64_t in = 0, w = 0, out = 0;
    for (const GemmShape& s : shapes_) {
      in = std::max(in, s.N * s.C);
      w = std::max(w, s.OC * s.C);
      out = std::max(out, s.N * s.OC);
    }
    auto fill = [](std::vector<float>& v, int64_t n, uint64_t key) {
      v.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = 0.01f * static_cast<float>((i * 7 + key) % 17) - 0.08f;
    };
    fill(inp_, in, 1);
    fill(dinp_, in, 2);
    fill(weight_, w, 3);
    fill(dweight_, w, 4);
    fill(out_, out, 5);
  }

  // Runs every GEMM of one training step once; returns the seconds it took.
  double run() {
    Stopwatch all;
    for (GemmShape& s : shapes_) {
      Stopwatch watch;
      const int64_t n = s.N, c = s.C, oc = s.OC;
      for (int64_t k = 0; k < s.count; ++k) {
        // forward: out (N,OC) = inp (N,C) @ weight (OC,C)^T
        gemm(false, true, n, oc, c, 1.0f, inp_.data(), c, weight_.data(), c, 0.0f, out_.data(), oc);
        // backward: dinp (N,C) += dout (N,OC) @ weight (OC,C)
        gemm(false, false, n, c, oc, 1.0f, out_.data(), oc, weight_.data(), c, 1.0f, dinp_.data(),
             c);
        // backward: dweight (OC,C) += dout (N,OC)^T @ inp (N,C)
        gemm(true, false, oc, c, n, 1.0f, out_.data(), oc, inp_.data(), c, 1.0f, dweight_.data(),
             c);
      }
      s.seconds += watch.seconds();
    }
    return all.seconds();
  }

  double flops() const {
    double f = 0;
    for (const GemmShape& s : shapes_) f += s.flops();
    return f;
  }
  const std::vector<GemmShape>& shapes() const { return shapes_; }
  void reset_times() {
    for (GemmShape& s : shapes_) s.seconds = 0;
  }

 private:
  std::vector<GemmShape> shapes_;
  std::vector<float> inp_, dinp_, weight_, dweight_, out_;
};

std::vector<GemmShape> step_gemms(const GptConfig& m, int64_t B) {
  const int64_t BT = B * m.seq_len, C = m.d_model, L = m.n_layer;
  auto shape = [&](const char* what, int64_t in, int64_t out, int64_t count) {
    return GemmShape{.name = fmt::format("{} ({}x{} -> {})", what, BT, in, out),
                     .N = BT,
                     .C = in,
                     .OC = out,
                     .count = count};
  };
  return {shape("attn.c_attn", C, 3 * C, L), shape("attn.c_proj", C, C, L),
          shape("mlp.c_fc", C, 4 * C, L), shape("mlp.c_proj", 4 * C, C, L),
          shape("head (tied wte)", C, m.vocab, 1)};
}

std::string first_line_with(const char* path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown";
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One backend's side of the comparison: its own model, optimizer, data stream, profiler and
// GEMM set, and its timings.
struct Arm {
  std::string name;  // "onednn", "onednn:bf16", "onednn:bf16@default"
  GemmBackend backend;
  GemmPrecision precision = GemmPrecision::kF32;
  KernelIsa isa = elementwise_isa();
  void select() const {
    set_gemm_backend(backend);
    set_gemm_precision(precision);
    set_elementwise_isa(isa);
  }
  std::unique_ptr<Gpt> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<DataLoader> loader;
  Batch batch;
  OpProfiler profiler;
  std::unique_ptr<GemmSet> gemms;
  int64_t step = 0;
  double last_loss = 0;
  std::vector<double> step_s, gemm_s, ratios;
};

int run(const Options& opt) {
  Config config = load_config(opt.config);
  config.validate();
  if (config.model.kind != ModelKind::kGpt) {
    throw ConfigError(
        fmt::format("model.kind = \"{}\": this benchmark runs \"gpt\"", config.model.kind));
  }
  const GptConfig mc{.vocab = config.model.vocab,
                     .seq_len = config.model.seq_len,
                     .d_model = config.model.d_model,
                     .n_layer = config.model.n_layer,
                     .n_head = config.model.n_head};
  const int64_t B = config.train.micro_batch, T = config.context();
  set_blas_threads(opt.threads);
  OptimizerConfig oc{.name = config.train.optimizer,
                     .beta1 = static_cast<float>(config.train.beta1),
                     .beta2 = static_cast<float>(config.train.beta2),
                     .eps = static_cast<float>(config.train.eps),
                     .weight_decay = static_cast<float>(config.train.weight_decay),
                     .momentum = static_cast<float>(config.train.momentum),
                     .nesterov = config.train.nesterov};

  // Data: the config's corpus through the project's loader, or uniform random tokens.
  TrainingData data;
  Batch random_batch;
  std::string data_desc;
  if (opt.random_tokens) {
    random_batch.size = B;
    random_batch.seq_len = T;
    random_batch.tokens.resize(static_cast<size_t>(B * T));
    random_batch.targets.resize(static_cast<size_t>(B * T));
    const auto seed = static_cast<uint64_t>(config.run.seed);
    const auto vocab = static_cast<float>(mc.vocab);
    auto token = [&](uint64_t key, size_t i) {
      return std::min(static_cast<int32_t>(random_uniform(seed, key, i) * vocab),
                      static_cast<int32_t>(mc.vocab - 1));
    };
    for (size_t i = 0; i < random_batch.tokens.size(); ++i) {
      random_batch.tokens[i] = token(hash_name("bench.tokens"), i);
      random_batch.targets[i] = token(hash_name("bench.targets"), i);
    }
    data_desc = "uniform random tokens";
  } else {
    data = load_training_data(config, run_folder_of(config));
    data_desc = data.summary;
  }

  std::vector<Arm> arms(opt.backends.size());
  for (size_t a = 0; a < arms.size(); ++a) {
    Arm& arm = arms[a];
    // "backend[:precision][@isa]".
    arm.name = opt.backends[a];
    const size_t at = arm.name.find('@');
    const std::string gemm = arm.name.substr(0, at);
    const size_t colon = gemm.find(':');
    if (!parse_gemm_backend(gemm.substr(0, colon), &arm.backend) ||
        (colon != std::string::npos &&
         !parse_gemm_precision(gemm.substr(colon + 1), &arm.precision)) ||
        (at != std::string::npos && !parse_kernel_isa(arm.name.substr(at + 1), &arm.isa))) {
      throw ConfigError("--backends: unknown arm \"" + arm.name +
                        "\" (onednn, openblas, each optionally :f32 or :bf16, then optionally "
                        "@default, @avx2 or @avx512)");
    }
    if (!kernel_isa_supported(arm.isa)) {
      throw ConfigError("--backends: arm \"" + arm.name + "\": this CPU lacks " +
                        kernel_isa_name(arm.isa));
    }
    arm.model = std::make_unique<Gpt>(mc, B);
    arm.model->initialize(static_cast<uint64_t>(config.run.seed));
    arm.optimizer = make_optimizer(oc, arm.model->layout(), 0, arm.model->num_params());
    if (opt.random_tokens) {
      arm.batch = random_batch;
    } else {
      arm.loader = std::make_unique<DataLoader>(
          *data.train,
          SamplerOptions{.seed = static_cast<uint64_t>(config.run.seed), .micro_batch = B});
      arm.batch = arm.loader->make_batch();
    }
    arm.model->set_profiler(&arm.profiler);
    arm.gemms = std::make_unique<GemmSet>(step_gemms(mc, B));
  }
  const int64_t n = arms.front().model->num_params();
  const float lr = static_cast<float>(config.train.lr);
  auto train_step = [&](Arm& arm) {
    Gpt& model = *arm.model;
    {
      ScopedOp op(&arm.profiler, Op::kZeroGrads);
      model.zero_grads();
    }
    if (arm.loader) arm.loader->next(arm.batch, arm.step, 0);
    arm.last_loss = model.forward(arm.batch);
    model.backward(arm.batch, 1.0f);
    if (config.train.grad_clip > 0) {
      ScopedOp op(&arm.profiler, Op::kGradNorm);
      double norm = std::sqrt(grad_sum_squares(model.grads(), n));
      float scale = clip_scale(norm, static_cast<float>(config.train.grad_clip));
      if (scale < 1.0f) scale_grads(model.grads(), n, scale);
    }
    {
      ScopedOp op(&arm.profiler, Op::kOptimizer);
      arm.optimizer->step(model.params(), model.grads(), 0, n, lr, arm.step + 1);
    }
    ++arm.step;
  };

  const double step_flops = arms.front().model->flops_per_example() * static_cast<double>(B);
  const double set_flops = arms.front().gemms->flops();

  fmt::print("config        {}\n", opt.config);
  fmt::print("model         gpt V={} T={} C={} L={} NH={}, {} parameters, micro-batch {}, {}\n",
             mc.vocab, T, mc.d_model, mc.n_layer, mc.n_head, n, B, config.train.optimizer);
  fmt::print("data          {}\n", data_desc);
  fmt::print("machine       {} ({} logical CPUs), GEMM threads {}, load avg {}\n",
             first_line_with("/proc/cpuinfo", "model name"), std::thread::hardware_concurrency(),
             opt.threads, loadavg());
  for (const Arm& arm : arms) {
    arm.select();
    fmt::print("backend       {}, {}\n", gemm_backend_description(), elementwise_isa_description());
  }
  fmt::print("flops/step    {:.2f} GFLOP (flops_per_example x B = (6 N T + 12 L C T^2) x B)\n",
             step_flops * 1e-9);
  fmt::print("GEMM set      {:.2f} GFLOP (the step's linear-layer GEMMs, fwd + 2 bwd)\n",
             set_flops * 1e-9);

  auto round = [&](Arm& arm, bool timed) {
    arm.select();
    Stopwatch watch;
    train_step(arm);
    const double step_seconds = watch.seconds();
    const double gemm_seconds = arm.gemms->run();
    if (!timed) return;
    arm.step_s.push_back(step_seconds);
    arm.gemm_s.push_back(gemm_seconds);
    arm.ratios.push_back((step_flops / step_seconds) / (set_flops / gemm_seconds));
  };
  for (int64_t i = 0; i < opt.warmup; ++i) {
    for (Arm& arm : arms) round(arm, false);
  }
  const detail::OneDnnGemmStats warm = detail::onednn_gemm_stats();
  for (Arm& arm : arms) {
    arm.profiler.reset();
    arm.gemms->reset_times();
  }
  // Alternate which backend goes first, so neither always follows the other's cache state.
  for (int64_t i = 0; i < opt.steps; ++i) {
    for (size_t k = 0; k < arms.size(); ++k) {
      round(arms[(k + static_cast<size_t>(i)) % arms.size()], true);
    }
  }

  const double steps = static_cast<double>(opt.steps);
  const double tokens = static_cast<double>(B * T);
  const double Tn = static_cast<double>(T), Cn = static_cast<double>(mc.d_model);
  // The formula credits attention with the full T x T scores; a causal kernel needs about half.
  const double causal_flops =
      step_flops - 6.0 * static_cast<double>(mc.n_layer) * Cn * Tn * Tn * static_cast<double>(B);
  fmt::print("\n{} timed rounds (per backend: 1 training step + 1 GEMM set) after {} warm-up\n",
             opt.steps, opt.warmup);
  for (Arm& arm : arms) {
    arm.model->set_profiler(nullptr);
    double step_total = 0, gemm_total = 0;
    for (double v : arm.step_s) step_total += v;
    for (double v : arm.gemm_s) gemm_total += v;
    const double achieved = step_flops * steps / step_total;
    const double sgemm = set_flops * steps / gemm_total;
    fmt::print("\n== {} ==  last loss {:.4f}\n", arm.name, arm.last_loss);
    fmt::print("step time     median {:.1f} ms, mean {:.1f} ms\n", 1e3 * median(arm.step_s),
               1e3 * step_total / steps);
    fmt::print("tokens/s      {:.0f} (median step), {:.0f} (mean)\n", tokens / median(arm.step_s),
               tokens * steps / step_total);
    fmt::print("achieved      {:.2f} GFLOP/s\n", achieved * 1e-9);
    fmt::print("GEMM set      {:.2f} GFLOP/s (model GEMM mix, median round {:.2f})\n", sgemm * 1e-9,
               set_flops / median(arm.gemm_s) * 1e-9);
    for (const GemmShape& s : arm.gemms->shapes())
      fmt::print("  {:<36} {:>7.2f} GFLOP/s\n", s.name, s.flops() * steps / s.seconds * 1e-9);
    const double matmul_ms =
        arm.profiler.total_ms(Op::kMatmulForward) + arm.profiler.total_ms(Op::kMatmulBackward);
    fmt::print(
        "matmul ops    {:.2f} GFLOP/s inside the model (same GEMM flops / profiled "
        "matmul time)\n",
        set_flops * steps / (matmul_ms * 1e-3) * 1e-9);
    fmt::print(
        "ratio         {:.1f}% median of per-round ratios step / GEMM set (min {:.1f}%, max "
        "{:.1f}%); {:.1f}% of totals\n",
        100 * median(arm.ratios), 100 * *std::min_element(arm.ratios.begin(), arm.ratios.end()),
        100 * *std::max_element(arm.ratios.begin(), arm.ratios.end()), 100 * achieved / sgemm);
    fmt::print(
        "              {:.1f}% of totals if attention is credited only its causal half "
        "(6 L C T^2 per sequence instead of 12)\n",
        100 * (causal_flops * steps / step_total) / sgemm);
    fmt::print("share of step time per op ({} steps):\n{}", opt.steps,
               arm.profiler.format_report(step_total * 1e3));
  }
  if (arms.size() >= 2) {
    // Per round, the first arm against each other one: the ratios of the same round are
    // measured seconds apart, so the machine's drift largely cancels.
    const Arm& a = arms[0];
    for (size_t k = 1; k < arms.size(); ++k) {
      const Arm& b = arms[k];
      std::vector<double> step_speedup, gemm_speedup;
      for (size_t i = 0; i < a.step_s.size(); ++i) {
        step_speedup.push_back(b.step_s[i] / a.step_s[i]);
        gemm_speedup.push_back(b.gemm_s[i] / a.gemm_s[i]);
      }
      fmt::print(
          "\n{} vs {}: GEMM set {:.2f}x, training step {:.2f}x faster (medians of per-round "
          "time ratios; step min {:.2f}x, max {:.2f}x)\n",
          a.name, b.name, median(gemm_speedup), median(step_speedup),
          *std::min_element(step_speedup.begin(), step_speedup.end()),
          *std::max_element(step_speedup.begin(), step_speedup.end()));
    }
  }
  if (const detail::OneDnnGemmStats st = detail::onednn_gemm_stats(); st.calls > 0) {
    fmt::print(
        "oneDNN        {} primitives ({} KiB scratchpads), {} created in the timed rounds; {} GEMM "
        "calls, {} of them with run-time shapes\n",
        st.primitives_created, st.scratchpad_bytes / 1024,
        st.primitives_created - warm.primitives_created, st.calls, st.runtime_calls);
  }
  fmt::print("load avg      {}\n", loadavg());
  return 0;
}

}  // namespace
}  // namespace brigade

int main(int argc, char** argv) {
  brigade::Options opt;
  CLI::App app{"Single-process GPT training step and its GEMMs, on each GEMM backend"};
  app.add_option("--config", opt.config, "TOML config (default: configs/bench-small.toml)");
  app.add_option("--steps", opt.steps, "timed rounds (per backend: training step + GEMM set)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", opt.warmup, "untimed rounds first")->check(CLI::NonNegativeNumber);
  app.add_option("--threads", opt.threads, "GEMM threads (both backends)")
      ->check(CLI::PositiveNumber);
  app.add_option("--backends", opt.backends,
                 "arms compared side by side (first vs rest): backend[:precision], e.g. "
                 "onednn,onednn:bf16,openblas, each optionally @default, @avx2 or @avx512 (the "
                 "element-wise kernels' ISA)")
      ->delimiter(',');
  app.add_flag("--random-tokens", opt.random_tokens,
               "uniform random tokens instead of the config's corpus");
  CLI11_PARSE(app, argc, argv);
  try {
    return brigade::run(opt);
  } catch (const brigade::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
