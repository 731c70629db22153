// ZeRO memory benchmark: peak resident memory per rank for DDP and ZeRO-1/2/3, next to the
// formulas of Rajbhandari et al. (SC 2020) for f32 weights and AdamW (bytes per parameter, N
// data-parallel ranks):
//
//   DDP 16 (params 4, grads 4, Adam m and v 8)   ZeRO-1 8 + 8/N   ZeRO-2 4 + 12/N   ZeRO-3 16/N
//
// Each configuration runs as real processes (fork, one per rank) joined over loopback Gloo,
// exactly as the trainer drives them: a GPT (random tokens), the DpStrategy of the stage, a few
// training steps (zero grads, forward, backward with bucketed communication, global norm, clip,
// AdamW step). Each rank measures
//   base   VmRSS once its communicator is connected, before the model exists;
//   peak   VmHWM over the training steps only (the high-water mark is reset with
//          /proc/self/clear_refs after setup: initialisation writes every parameter once on
//          every rank, which is not what the formulas describe).
// Activations (and every other per-step buffer the formulas leave out: activation gradients,
// logits, BLAS workspace) are measured separately, as peak - base - 16 P of a single-process
// run, and added to every prediction:
//   predicted = base + formula * P + activations;   target: |peak / predicted - 1| <= 15%.
// A second column adds what the formulas leave out by design, the working set in flight (G =
// the largest layer group, a block; b = parallel.bucket_mb of f32):
//   ZeRO-1  all-gather chunks: 2 (b/N + b)
//   ZeRO-2  that + the gradient of the block backward is computing (4 G) + the gradient being
//           exchanged (at most 4 b) + 2 receive buffers (2 b)
//   ZeRO-3  the gather budget (parallel/sharded_params.h: parameters gathered or in flight +
//           gradients being produced, default 2 x 4 G) + 4 b + 2 b of gradient as ZeRO-2.
//           --gather-budget 0 lifts the budget (the schedule before it): backward then holds
//           the block computing, its gradient and the block prefetched, 3 x 4 G.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/model/gpt.h"
#include "brigade/optim/grad_clip.h"
#include "brigade/parallel/dp_strategy.h"
#include "brigade/runtime/host_port.h"
#include "brigade/runtime/process_group.h"
#include "brigade/tensor/rng.h"

namespace brigade {
namespace {

struct Options {
  GptConfig model{.vocab = 256, .seq_len = 128, .d_model = 512, .n_layer = 8, .n_head = 8};
  int64_t micro_batch = 4;
  int64_t steps = 2;
  double bucket_mb = 1.0;
  double gather_budget = 2.0;  // ZeRO-3, in largest groups; 0: unlimited
  std::vector<int> ranks = {2, 4};
};

// One rank's measurements, in KiB.
struct Sample {
  int stage = 0, world = 1, rank = 0;
  int64_t base_kb = 0, peak_kb = 0, params = 0;
  int64_t max_group = 0;  // elements of the largest parameter group
};

int64_t status_kb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stoll(line.substr(prefix.size()));
  }
  throw IoError(fmt::format("/proc/self/status: no {} line", key));
}

void reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";  // resets VmHWM to the current VmRSS (Linux >= 4.0)
  if (!out) throw IoError("/proc/self/clear_refs: cannot reset the peak RSS");
}

double budget_groups(const Options& o) {
  return o.gather_budget > 0 ? o.gather_budget : std::numeric_limits<double>::infinity();
}

// One rank of one configuration, in a forked child. Writes one line to fd.
void run_rank(const Options& o, int stage, int world, int rank, int port, int fd) {
  set_blas_threads(1);
  DistEnv env{.rank = rank,
              .world_size = world,
              .local_rank = rank,
              .local_world_size = world,
              .master_addr = "127.0.0.1",
              .master_port = port,
              .source = "bench"};
  CommConfig comm;
  comm.store = "tcp";
  comm.timeout_s = 900;
  ProcessGroup group = join_process_group(comm, env);

  Sample s;
  s.stage = stage;
  s.world = world;
  s.rank = rank;
  s.base_kb = status_kb("VmRSS");
  Gpt model(o.model, o.micro_batch);
  s.params = model.num_params();
  for (const ParamGroup& g : model.param_groups())
    s.max_group = std::max(s.max_group, g.end - g.begin);
  auto sync = make_dp_strategy(
      group.world.get(), model, OptimizerConfig{},
      DpOptions{.zero = stage,
                .bucket_elems = static_cast<int64_t>(o.bucket_mb * (1 << 20) / sizeof(float)),
                .gather_budget_groups = budget_groups(o)});
  model.initialize(1);
  sync->after_restore(false);

  const int64_t n = o.micro_batch * o.model.seq_len;
  Batch batch;
  batch.size = o.micro_batch;
  batch.seq_len = o.model.seq_len;
  batch.tokens.resize(n);
  batch.targets.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const float u = random_uniform(7, static_cast<uint64_t>(rank), static_cast<uint64_t>(i));
    const float v = random_uniform(8, static_cast<uint64_t>(rank), static_cast<uint64_t>(i));
    batch.tokens[i] = static_cast<int32_t>(u * static_cast<float>(o.model.vocab - 1));
    batch.targets[i] = static_cast<int32_t>(v * static_cast<float>(o.model.vocab - 1));
  }
  if (group.world) group.world->barrier();
  reset_peak_rss();
  for (int64_t step = 1; step <= o.steps; ++step) {
    sync->start_step();
    model.forward(batch);
    sync->before_backward(true);
    model.backward(batch, 1.0f);
    sync->finish_gradients();
    const double norm = std::sqrt(sync->grad_sum_squares());
    const float scale = clip_scale(norm, 1.0f);
    if (scale < 1.0f) sync->scale_grads(scale);
    sync->step(1e-4f, step);
  }
  s.peak_kb = status_kb("VmHWM");
  if (group.world) group.world->barrier();
  const std::string line = fmt::format("{} {} {} {} {} {} {}\n", s.stage, s.world, s.rank,
                                       s.base_kb, s.peak_kb, s.params, s.max_group);
  if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(3);
}

// Runs one configuration on `world` forked processes; returns their samples by rank.
std::vector<Sample> run_config(const Options& o, int stage, int world) {
  int fds[2];
  if (pipe(fds) != 0) throw IoError("pipe() failed");
  const int port = world > 1 ? pick_free_port() : 0;
  std::vector<pid_t> children;
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid < 0) throw IoError("fork() failed");
    if (pid == 0) {
      close(fds[0]);
      int code = 0;
      try {
        run_rank(o, stage, world, r, port, fds[1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] %s\n", r, e.what());
        code = 1;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t k; (k = read(fds[0], buf, sizeof(buf))) > 0;) text.append(buf, k);
  close(fds[0]);
  bool ok = true;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) throw Error(fmt::format("zero={} on {} ranks: a rank failed", stage, world));
  std::vector<Sample> out(static_cast<size_t>(world));
  std::istringstream in(text);
  Sample s;
  while (in >> s.stage >> s.world >> s.rank >> s.base_kb >> s.peak_kb >> s.params >> s.max_group) {
    out[s.rank] = s;
  }
  return out;
}

double formula_bytes(int stage, int world) {
  const double n = world;
  switch (stage) {
    case 0:
      return 16;
    case 1:
      return 8 + 8 / n;
    case 2:
      return 4 + 12 / n;
    default:
      return 16 / n;
  }
}

// The working set in flight that the formulas leave out (see the top of this file), in KiB.
double in_flight_kb(int stage, int world, double max_group, double bucket_mb, double budget) {
  const double b = bucket_mb * 1024, g = 4 * max_group / 1024, n = world;
  switch (stage) {
    case 0:
      return 0;
    case 1:
      return 2 * (b / n + b);
    case 2:
      return 2 * (b / n + b) + g + 6 * b;
    default:
      return std::min(budget, 3.0) * g + 6 * b;
  }
}

std::string stage_name(int stage) {
  return stage == 0 ? "DDP" : fmt::format("ZeRO-{}", stage);
}

int run(const Options& o) {
  const double mib = 1024.0;
  std::vector<Sample> single = run_config(o, 0, 1);
  const double params = static_cast<double>(single[0].params);
  const double act_kb =
      static_cast<double>(single[0].peak_kb - single[0].base_kb) - 16.0 * params / 1024.0;
  fmt::print(
      "GPT d_model {} n_layer {} seq_len {} vocab {}, micro-batch {}: P = {} parameters "
      "({:.1f} MiB f32); {} steps per run, bucket {} MiB, ZeRO-3 gather budget {} groups\n",
      o.model.d_model, o.model.n_layer, o.model.seq_len, o.model.vocab, o.micro_batch,
      single[0].params, params * 4 / (1 << 20), o.steps, o.bucket_mb, budget_groups(o));
  fmt::print(
      "single process (DDP, 1 rank): base {:.1f} MiB, peak {:.1f} MiB -> activations "
      "and workspace A = peak - base - 16 P = {:.1f} MiB\n\n",
      single[0].base_kb / mib, single[0].peak_kb / mib, act_kb / mib);
  fmt::print("{:<8} {:>5} {:>8} {:>10} {:>9} {:>10} {:>11} {:>9} {:>10} {:>9}\n", "strategy",
             "ranks", "B/param", "state MiB", "base MiB", "predicted", "peak (max)", "peak/pred",
             "+flight", "peak/all");
  double worst = 0, worst_all = 0;
  for (int world : o.ranks) {
    for (int stage = 0; stage <= 3; ++stage) {
      std::vector<Sample> samples = run_config(o, stage, world);
      const double f = formula_bytes(stage, world);
      const double state_kb = f * params / 1024.0;
      const double flight_kb = in_flight_kb(stage, world, static_cast<double>(samples[0].max_group),
                                            o.bucket_mb, budget_groups(o));
      double max_peak = 0, max_pred = 0, max_base = 0, dev = 0, dev_all = 0;
      for (const Sample& s : samples) {
        const double pred = static_cast<double>(s.base_kb) + state_kb + act_kb;
        max_peak = std::max(max_peak, static_cast<double>(s.peak_kb));
        max_pred = std::max(max_pred, pred);
        max_base = std::max(max_base, static_cast<double>(s.base_kb));
        const double d = static_cast<double>(s.peak_kb) / pred - 1;
        const double d_all = static_cast<double>(s.peak_kb) / (pred + flight_kb) - 1;
        if (std::abs(d) > std::abs(dev)) dev = d;
        if (std::abs(d_all) > std::abs(dev_all)) dev_all = d_all;
      }
      worst = std::max(worst, std::abs(dev));
      worst_all = std::max(worst_all, std::abs(dev_all));
      fmt::print(
          "{:<8} {:>5} {:>8.2f} {:>10.1f} {:>9.1f} {:>10.1f} {:>11.1f} {:>+8.1f}% {:>10.1f} "
          "{:>+8.1f}%\n",
          stage_name(stage), world, f, state_kb / mib, max_base / mib, max_pred / mib,
          max_peak / mib, 100 * dev, (max_pred + flight_kb) / mib, 100 * dev_all);
    }
  }
  fmt::print(
      "\npeak/pred: the worst rank's deviation from base + formula + A; largest "
      "{:.1f}% (target <= 15%: {}). peak/all: from that + the working set in flight; "
      "largest {:.1f}%.\n",
      100 * worst, worst <= 0.15 ? "met" : "NOT met", 100 * worst_all);
  return 0;
}

}  // namespace
}  // namespace brigade

int main(int argc, char** argv) {
  brigade::Options o;
  CLI::App app{"Peak resident memory per rank: DDP and ZeRO-1/2/3 vs the formulas"};
  app.add_option("--d-model", o.model.d_model);
  app.add_option("--n-layer", o.model.n_layer);
  app.add_option("--n-head", o.model.n_head);
  app.add_option("--seq-len", o.model.seq_len);
  app.add_option("--vocab", o.model.vocab);
  app.add_option("--micro-batch", o.micro_batch);
  app.add_option("--steps", o.steps);
  app.add_option("--bucket-mb", o.bucket_mb);
  app.add_option("--gather-budget", o.gather_budget,
                 "ZeRO-3 gather budget in largest parameter groups (0: unlimited)");
  app.add_option("--ranks", o.ranks, "data-parallel sizes to measure (besides 1)");
  CLI11_PARSE(app, argc, argv);
  try {
    return brigade::run(o);
  } catch (const brigade::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.exit_code();
  }
}
