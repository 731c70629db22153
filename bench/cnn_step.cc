// The NIID-Bench CNN's forward + backward on one process, oneDNN against OpenBLAS: each
// backend's model (same initialisation, same batch) runs one pass in turn, round by round, so
// the noise of a shared machine falls on both; reported are the median milliseconds per
// micro-batch, the median of the per-round ratios and, from separate profiled passes, where the
// time goes by kernel (monitor/op_profiler.h). Random images and labels: the arithmetic does
// not depend on the values.
//   bench_cnn_step [--batch 64] [--rounds 100] [--threads 1]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <vector>

#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/model/cnn_classifier.h"
#include "brigade/monitor/op_profiler.h"
#include "brigade/monitor/timer.h"
#include "brigade/tensor/rng.h"

namespace brigade {
namespace {

constexpr GemmBackend kBackends[] = {GemmBackend::kOneDnn, GemmBackend::kOpenBlas};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(int64_t batch_size, int rounds, int threads) {
  const CnnConfig config;
  set_blas_threads(threads);
  Batch batch;
  batch.size = batch_size;
  const int64_t D = config.in_channels * config.height * config.width;
  batch.features.resize(static_cast<size_t>(batch_size * D));
  fill_normal(batch.features.data(), batch_size * D, 0.0f, 1.0f, 1, hash_name("images"));
  for (int64_t i = 0; i < batch_size; ++i)
    batch.targets.push_back(static_cast<int32_t>(i % config.classes));
  const double flops = cnn_flops_per_example(config) * static_cast<double>(batch_size);
  fmt::print("NIID-Bench CNN, batch {}, {} thread(s): {:.2f} MFLOP per example\n", batch_size,
             threads, cnn_flops_per_example(config) / 1e6);

  std::vector<std::unique_ptr<CnnClassifier>> models;
  for (size_t b = 0; b < std::size(kBackends); ++b) {
    models.push_back(std::make_unique<CnnClassifier>(config, batch_size));
    models.back()->initialize(2);
  }
  auto pass = [&](size_t b) {
    set_gemm_backend(kBackends[b]);
    models[b]->zero_grads();
    models[b]->forward(batch);
    models[b]->backward(batch, 1.0f);
  };
  for (int k = 0; k < 5; ++k)  // warm-up: oneDNN's primitives, first-touch pages
    for (size_t b = 0; b < models.size(); ++b) pass(b);
  std::vector<std::vector<double>> ms(models.size());
  std::vector<double> ratio;
  for (int k = 0; k < rounds; ++k) {
    for (size_t b = 0; b < models.size(); ++b) {
      Stopwatch watch;
      pass(b);
      ms[b].push_back(watch.millis());
    }
    ratio.push_back(ms[1].back() / ms[0].back());
  }
  for (size_t b = 0; b < models.size(); ++b) {
    const double m = median(ms[b]);
    fmt::print("{:>8}: {:.3f} ms per forward + backward (min {:.3f}), {:.1f} GFLOP/s\n",
               gemm_backend_name(kBackends[b]), m, *std::min_element(ms[b].begin(), ms[b].end()),
               flops / m / 1e6);
  }
  fmt::print("openblas / onednn, median of {} rounds: {:.2f}x\n", rounds, median(ratio));

  // The breakdown from separate passes, so the timed ones carry no profiler.
  for (size_t b = 0; b < models.size(); ++b) {
    OpProfiler profiler;
    models[b]->set_profiler(&profiler);
    for (int k = 0; k < rounds; ++k) pass(b);
    models[b]->set_profiler(nullptr);
    fmt::print("\n{}, {} passes:\n{}", gemm_backend_name(kBackends[b]), rounds,
               profiler.format_report());
  }
  return 0;
}

}  // namespace
}  // namespace brigade

int main(int argc, char** argv) {
  CLI::App app("forward + backward of the NIID-Bench CNN, oneDNN against OpenBLAS");
  int64_t batch = 64;
  int rounds = 100, threads = 1;
  app.add_option("--batch", batch, "examples per micro-batch")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "timed passes per backend")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "GEMM threads")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  return brigade::run(batch, rounds, threads);
}
