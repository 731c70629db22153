// Single-process training-step benchmark: how close does one GPT training step (forward,
// backward, gradient clipping, AdamW) come to the single-thread sgemm throughput of the same
// machine, measured in the same run?
//
// The reference is the GEMM mix of the step itself: every linear-layer product the model
// runs in one step (forward out = x W^T, backward dx += dy W and dW += dy^T x, for c_attn,
// attn.c_proj, mlp.c_fc and mlp.c_proj of each layer and the tied head), issued as plain
// cblas_sgemm calls on buffers of the same shapes. Its GFLOP/s is what the step would reach
// if everything it does ran as fast as OpenBLAS runs its largest products. The machine is
// shared and noisy, so the two are interleaved round by round (one training step, then one
// sgemm set) and the headline ratio is the median of the per-round ratios.
//
// Achieved FLOP/s counts Model::flops_per_example (6 N T + 12 L C T^2 per sequence, PaLM's
// formula: N = parameters except wpe; attention without a causal discount) over the wall
// time of the step.
#include <cblas.h>
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
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/model/gpt.h"
#include "brigade/monitor/op_profiler.h"
#include "brigade/monitor/timer.h"
#include "brigade/runtime/config.h"
#include "brigade/runtime/run_folder.h"
#include "brigade/sync/grad_clip.h"
#include "brigade/sync/optimizer.h"
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
};

// One linear layer's three GEMMs (all row-major, as kernels/cpu/matmul.cc issues them).
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
      const int n = static_cast<int>(s.N), c = static_cast<int>(s.C), oc = static_cast<int>(s.OC);
      for (int64_t k = 0; k < s.count; ++k) {
        // forward: out (N,OC) = inp (N,C) @ weight (OC,C)^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, oc, c, 1.0f, inp_.data(), c,
                    weight_.data(), c, 0.0f, out_.data(), oc);
        // backward: dinp (N,C) += dout (N,OC) @ weight (OC,C)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, c, oc, 1.0f, out_.data(), oc,
                    weight_.data(), c, 1.0f, dinp_.data(), c);
        // backward: dweight (OC,C) += dout (N,OC)^T @ inp (N,C)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, oc, c, n, 1.0f, out_.data(), oc,
                    inp_.data(), c, 1.0f, dweight_.data(), c);
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

int run(const Options& opt) {
  Config config = load_config(opt.config);
  config.validate();
  if (config.model.kind != "gpt")
    throw ConfigError("model.kind = \"" + config.model.kind + "\": this benchmark runs \"gpt\"");
  const GptConfig mc{.vocab = config.model.vocab,
                     .seq_len = config.model.seq_len,
                     .d_model = config.model.d_model,
                     .n_layer = config.model.n_layer,
                     .n_head = config.model.n_head};
  const int64_t B = config.train.micro_batch, T = config.context();
  set_blas_threads(opt.threads);

  Gpt model(mc, B);
  model.initialize(static_cast<uint64_t>(config.run.seed));
  OptimizerConfig oc{.name = config.train.optimizer,
                     .beta1 = static_cast<float>(config.train.beta1),
                     .beta2 = static_cast<float>(config.train.beta2),
                     .eps = static_cast<float>(config.train.eps),
                     .weight_decay = static_cast<float>(config.train.weight_decay),
                     .momentum = static_cast<float>(config.train.momentum),
                     .nesterov = config.train.nesterov};
  auto optimizer = make_optimizer(oc, model.layout(), 0, model.num_params());

  // Data: the config's corpus through the project's loader, or uniform random tokens.
  TrainingData data;
  std::unique_ptr<DataLoader> loader;
  Batch batch;
  std::string data_desc;
  if (opt.random_tokens) {
    batch.size = B;
    batch.seq_len = T;
    batch.tokens.resize(static_cast<size_t>(B * T));
    batch.targets.resize(static_cast<size_t>(B * T));
    const auto seed = static_cast<uint64_t>(config.run.seed);
    const auto vocab = static_cast<float>(mc.vocab);
    auto token = [&](uint64_t key, size_t i) {
      return std::min(static_cast<int32_t>(random_uniform(seed, key, i) * vocab),
                      static_cast<int32_t>(mc.vocab - 1));
    };
    for (size_t i = 0; i < batch.tokens.size(); ++i) {
      batch.tokens[i] = token(hash_name("bench.tokens"), i);
      batch.targets[i] = token(hash_name("bench.targets"), i);
    }
    data_desc = "uniform random tokens";
  } else {
    data = load_training_data(config, run_folder_of(config));
    loader = std::make_unique<DataLoader>(
        *data.train,
        SamplerOptions{.seed = static_cast<uint64_t>(config.run.seed), .micro_batch = B});
    batch = loader->make_batch();
    data_desc = data.summary;
  }

  OpProfiler profiler;
  model.set_profiler(&profiler);
  const int64_t n = model.num_params();
  const float lr = static_cast<float>(config.train.lr);
  int64_t step = 0;
  double last_loss = 0;
  auto train_step = [&] {
    {
      ScopedOp op(&profiler, Op::kZeroGrads);
      model.zero_grads();
    }
    if (loader) loader->next(batch, step, 0);
    last_loss = model.forward(batch);
    model.backward(batch, 1.0f);
    if (config.train.grad_clip > 0) {
      ScopedOp op(&profiler, Op::kGradNorm);
      double norm = std::sqrt(grad_sum_squares(model.grads(), n));
      float scale = clip_scale(norm, static_cast<float>(config.train.grad_clip));
      if (scale < 1.0f) scale_grads(model.grads(), n, scale);
    }
    {
      ScopedOp op(&profiler, Op::kOptimizer);
      optimizer->step(model.params(), model.grads(), 0, n, lr, step + 1);
    }
    ++step;
  };

  GemmSet gemms(step_gemms(mc, B));
  const double step_flops = model.flops_per_example() * static_cast<double>(B);

  fmt::print("config        {}\n", opt.config);
  fmt::print("model         gpt V={} T={} C={} L={} NH={}, {} parameters, micro-batch {}, {}\n",
             mc.vocab, T, mc.d_model, mc.n_layer, mc.n_head, n, B, config.train.optimizer);
  fmt::print("data          {}\n", data_desc);
  fmt::print("machine       {} ({} logical CPUs), BLAS threads {}, load avg {}\n",
             first_line_with("/proc/cpuinfo", "model name"), std::thread::hardware_concurrency(),
             opt.threads, loadavg());
  fmt::print("openblas      {}\n", openblas_get_config());
  fmt::print("flops/step    {:.2f} GFLOP (flops_per_example x B = (6 N T + 12 L C T^2) x B)\n",
             step_flops * 1e-9);
  fmt::print("sgemm set     {:.2f} GFLOP (the step's linear-layer GEMMs, fwd + 2 bwd)\n",
             gemms.flops() * 1e-9);

  for (int64_t i = 0; i < opt.warmup; ++i) {
    train_step();
    gemms.run();
  }
  profiler.reset();
  gemms.reset_times();

  std::vector<double> step_s, gemm_s, ratios;
  for (int64_t i = 0; i < opt.steps; ++i) {
    Stopwatch watch;
    train_step();
    step_s.push_back(watch.seconds());
    gemm_s.push_back(gemms.run());
    ratios.push_back((step_flops / step_s.back()) / (gemms.flops() / gemm_s.back()));
  }
  model.set_profiler(nullptr);

  double step_total = 0, gemm_total = 0;
  for (double s : step_s) step_total += s;
  for (double s : gemm_s) gemm_total += s;
  const double steps = static_cast<double>(opt.steps);
  const double achieved = step_flops * steps / step_total;
  const double sgemm = gemms.flops() * steps / gemm_total;
  const double tokens = static_cast<double>(B * T);

  fmt::print(
      "\n{} timed rounds (1 training step + 1 sgemm set each) after {} warm-up; "
      "last loss {:.4f}\n",
      opt.steps, opt.warmup, last_loss);
  fmt::print("step time     median {:.1f} ms, mean {:.1f} ms\n", 1e3 * median(step_s),
             1e3 * step_total / steps);
  fmt::print("tokens/s      {:.0f} (median step), {:.0f} (mean)\n", tokens / median(step_s),
             tokens * steps / step_total);
  fmt::print("achieved      {:.2f} GFLOP/s\n", achieved * 1e-9);
  fmt::print("sgemm         {:.2f} GFLOP/s (model GEMM mix, single thread)\n", sgemm * 1e-9);
  for (const GemmShape& s : gemms.shapes())
    fmt::print("  {:<36} {:>7.2f} GFLOP/s\n", s.name, s.flops() * steps / s.seconds * 1e-9);
  const double matmul_ms =
      profiler.total_ms(Op::kMatmulForward) + profiler.total_ms(Op::kMatmulBackward);
  fmt::print(
      "matmul ops    {:.2f} GFLOP/s inside the model (same GEMM flops / profiled "
      "matmul time)\n",
      gemms.flops() * steps / (matmul_ms * 1e-3) * 1e-9);
  fmt::print(
      "ratio         {:.1f}% median of per-round ratios (min {:.1f}%, max {:.1f}%); "
      "{:.1f}% of totals; target >= 60%\n",
      100 * median(ratios), 100 * *std::min_element(ratios.begin(), ratios.end()),
      100 * *std::max_element(ratios.begin(), ratios.end()), 100 * achieved / sgemm);
  // The formula credits attention with the full T x T scores; a causal kernel needs about half.
  const double Tn = static_cast<double>(T), Cn = static_cast<double>(mc.d_model);
  const double causal_flops =
      step_flops - 6.0 * static_cast<double>(mc.n_layer) * Cn * Tn * Tn * static_cast<double>(B);
  fmt::print(
      "              {:.1f}% of totals if attention is credited only its causal half "
      "(6 L C T^2 per sequence instead of 12)\n",
      100 * (causal_flops * steps / step_total) / sgemm);
  fmt::print("load avg      {}\n", loadavg());
  fmt::print("\nshare of step time per op ({} steps):\n{}", opt.steps,
             profiler.format_report(step_total * 1e3));
  return 0;
}

}  // namespace
}  // namespace brigade

int main(int argc, char** argv) {
  brigade::Options opt;
  CLI::App app{"Single-process GPT training-step throughput vs single-thread sgemm"};
  app.add_option("--config", opt.config, "TOML config (default: configs/bench-small.toml)");
  app.add_option("--steps", opt.steps, "timed rounds (training step + sgemm set)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", opt.warmup, "untimed rounds first")->check(CLI::NonNegativeNumber);
  app.add_option("--threads", opt.threads, "OpenBLAS threads")->check(CLI::PositiveNumber);
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
