// Pipeline bubble benchmark: for p ranks (real processes over loopback Gloo) and m micro-batches,
// every schedule's measured bubble (idle fraction of the step per rank) next to its theory
// (parallel/pipeline/schedule.h), and the peak activation memory per rank (slots of
// (micro-batch, chunk) alive at once, and bytes of the executor's activation / gradient buffers).
//
// Two stages:
//   mlp    the real MlpStage: a stack of width x width Linear -> GELU layers split evenly over
//          the p v stages (v = 2 for interleaved), so one F, B and W cost about the same matmul.
//          Each process runs BLAS on one thread. With more ranks than cores the ranks contend:
//          while all compute, each runs slower than while some idle, which hides part of the
//          bubble; the bench prints the cores it saw.
//   sleep  a stage whose F, B and W each sleep a fixed time (divided by v per chunk) and pass
//          activations of the mlp stage's size: an accelerator that does not share the CPU, so
//          the measured bubble is the schedule's plus the executor's and the transport's
//          overheads, independent of the cores available.
// The bubble is measured per rank as 1 - busy / step (busy: inside the stage's calls; step: from
// a barrier before to a barrier after the executor's step, so it ends with the slowest rank, as
// a training step does), averaged over the timed steps; the table shows the mean over ranks and the
// worst rank. Theory for ZB-H1 uses the measured mean F, B and W costs. "simulated" runs the same
// action lists through the simulator with the measured costs and, per message, the measured hop
// time (a ring exchange of one activation): what the schedule should give once communication
// latency and wake-ups on this machine are counted.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "brigade/comm/comm_factory.h"
#include "brigade/comm/file_store.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/parallel/pipeline/executor.h"
#include "brigade/parallel/pipeline/layer_partition.h"
#include "brigade/parallel/pipeline/mlp_stage.h"
#include "brigade/parallel/pipeline/simulator.h"
#include "brigade/tensor/rng.h"

namespace brigade {
namespace {

struct Options {
  int ranks = 4;
  std::vector<int> micro_batches = {8, 16};
  int steps = 3;
  int64_t width = 1024;
  int layers = 16;
  int64_t micro_batch = 32;
  double sleep_ms = 6.0;  // per F, B and W of a whole stage (sleep stage)
  std::vector<std::string> stages = {"sleep", "mlp"};
};

// F, B and W each sleep; activations have the real sizes so messages cost what they would.
class SleepStage : public PipelineStage {
 public:
  SleepStage(double ms, int64_t act_floats, bool first, bool last)
      : d_(std::chrono::duration<double, std::milli>(ms)),
        act_(act_floats),
        first_(first),
        last_(last) {}
  int64_t input_floats() const override { return first_ ? 0 : act_; }
  int64_t output_floats() const override { return last_ ? 0 : act_; }
  int64_t saved_floats() const override { return act_; }
  float forward(int, const float*, float*, float*) override {
    std::this_thread::sleep_for(d_);
    return 0.0f;
  }
  void backward_input(int, const float*, const float*, float*, float*) override {
    std::this_thread::sleep_for(d_);
  }
  void backward_weight(int, const float*, const float*) override {
    std::this_thread::sleep_for(d_);
  }

 private:
  std::chrono::duration<double, std::milli> d_;
  int64_t act_;
  bool first_, last_;
};

struct RankResult {
  double bubble = 0, wall_ms = 0, f_ms = 0, b_ms = 0, w_ms = 0, hop_ms = 0;
  int peak_slots = 0;
  int64_t peak_bytes = 0;
};

RankResult run_rank(const Options& o, const std::string& stage_kind, ScheduleKind kind, int m,
                    int rank, const std::string& store_dir) {
  set_blas_threads(1);
  const int p = o.ranks, v = kind == ScheduleKind::kInterleaved ? 2 : 1;
  CommOptions co;
  co.rank = rank;
  co.size = p;
  co.timeout = std::chrono::seconds(300);
  co.store = std::make_shared<FileStore>(store_dir, co.timeout);
  auto comm = create_communicator(co);

  const Schedule schedule = build_schedule(kind, {p, m, v});
  std::vector<int64_t> widths(static_cast<size_t>(o.layers + 1), o.width);
  const std::vector<int> bounds = stage_boundaries(balance_layers(mlp_layer_params(widths), p * v));
  std::vector<float> features(static_cast<size_t>(m * o.micro_batch * o.width));
  std::vector<int32_t> targets(static_cast<size_t>(m * o.micro_batch));
  fill_normal(features.data(), static_cast<int64_t>(features.size()), 0.0f, 1.0f, 1, 2);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<int32_t>(i % o.width);

  std::vector<std::unique_ptr<PipelineStage>> chunks;
  std::vector<MlpStage*> mlps;
  for (int c = 0; c < v; ++c) {
    const int s = c * p + rank;
    if (stage_kind == "sleep") {
      chunks.push_back(std::make_unique<SleepStage>(o.sleep_ms / v, o.micro_batch * o.width, s == 0,
                                                    s == p * v - 1));
    } else {
      auto mlp = std::make_unique<MlpStage>(MlpStageConfig{.widths = widths,
                                                           .first_layer = bounds[s],
                                                           .end_layer = bounds[s + 1],
                                                           .micro_batch = o.micro_batch});
      fill_normal(mlp->params(), mlp->num_params(), 0.0f,
                  1.0f / std::sqrt(static_cast<float>(o.width)), 3, static_cast<uint64_t>(s));
      mlp->set_batch(features.data(), targets.data(), m);
      mlps.push_back(mlp.get());
      chunks.push_back(std::move(mlp));
    }
  }
  std::vector<PipelineStage*> ptrs;
  for (auto& c : chunks) ptrs.push_back(c.get());
  PipelineExecutor exec(*comm, schedule, ptrs);

  RankResult r;
  // One hop: every rank sends an activation-sized message to the next and receives one from the
  // previous, as the pipeline does; the mean round time is what a message adds to a dependency.
  {
    std::vector<float> out(static_cast<size_t>(o.micro_batch * o.width)), in(out.size());
    const int64_t n = static_cast<int64_t>(out.size() * sizeof(float));
    constexpr int kRounds = 20;
    comm->barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRounds; ++i) {
      auto s = comm->send_async(out.data(), n, (rank + 1) % p, 1u << 30);
      auto rv = comm->recv_async(in.data(), n, (rank + p - 1) % p, 1u << 30);
      s->wait();
      rv->wait();
    }
    r.hop_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                   .count() /
               kRounds;
  }
  for (int step = -1; step < o.steps; ++step) {  // step -1 warms the pool and the connections
    for (MlpStage* mlp : mlps) mlp->zero_grads();
    comm->barrier();
    const auto start = std::chrono::steady_clock::now();
    const StepStats st = exec.run_step();
    // The step ends when the last rank is done (the optimizer step waits for it): a rank that
    // finishes early idles until then.
    comm->barrier();
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step < 0) continue;
    r.bubble += (1.0 - st.busy_s / wall_s) / o.steps;
    r.wall_ms += wall_s * 1e3 / o.steps;
    // Per action of one chunk (a rank runs m v of each).
    r.f_ms += st.forward_s * 1e3 / (o.steps * m * v);
    r.b_ms += st.input_grad_s * 1e3 / (o.steps * m * v);
    r.w_ms += st.weight_grad_s * 1e3 / (o.steps * m * v);
    r.peak_slots = st.peak_slots;
    r.peak_bytes = st.peak_bytes;
  }
  return r;
}

std::vector<RankResult> run_config(const Options& o, const std::string& stage_kind,
                                   ScheduleKind kind, int m) {
  static int run = 0;
  const std::string dir = fmt::format("/tmp/brigade-pp-bench-{}-{}", ::getpid(), run++);
  std::filesystem::create_directories(dir);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < o.ranks; ++rank) {
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        const RankResult r = run_rank(o, stage_kind, kind, m, rank, dir);
        std::ofstream out(fmt::format("{}/rank_{}.txt", dir, rank));
        out << r.bubble << ' ' << r.wall_ms << ' ' << r.f_ms << ' ' << r.b_ms << ' ' << r.w_ms
            << ' ' << r.hop_ms << ' ' << r.peak_slots << ' ' << r.peak_bytes << '\n';
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        code = 1;
      }
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::vector<RankResult> out;
  for (int rank = 0; ok && rank < o.ranks; ++rank) {
    std::ifstream in(fmt::format("{}/rank_{}.txt", dir, rank));
    RankResult r;
    in >> r.bubble >> r.wall_ms >> r.f_ms >> r.b_ms >> r.w_ms >> r.hop_ms >> r.peak_slots >>
        r.peak_bytes;
    if (!in) ok = false;
    out.push_back(r);
  }
  std::filesystem::remove_all(dir);
  if (!ok) throw std::runtime_error("a rank failed");
  return out;
}

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"Pipeline bubble and activation memory per schedule"};
  app.add_option("--ranks", o.ranks, "pipeline ranks p");
  app.add_option("--micro-batches", o.micro_batches, "values of m");
  app.add_option("--steps", o.steps, "timed steps (after one warm-up step)");
  app.add_option("--width", o.width, "mlp: layer width");
  app.add_option("--layers", o.layers, "mlp: layers");
  app.add_option("--micro-batch", o.micro_batch, "examples per micro-batch");
  app.add_option("--sleep-ms", o.sleep_ms, "sleep: ms per F, B and W of a stage");
  app.add_option("--stages", o.stages, "sleep and/or mlp");
  CLI11_PARSE(app, argc, argv);

  fmt::print("p = {} ranks, {} hardware threads; micro-batch {} x width {}; {} timed steps\n",
             o.ranks, std::thread::hardware_concurrency(), o.micro_batch, o.width, o.steps);
  for (const std::string& stage_kind : o.stages) {
    fmt::print("\nstage: {}{}\n", stage_kind,
               stage_kind == "sleep"
                   ? fmt::format(" ({} ms per F, B, W of a stage)", o.sleep_ms)
                   : fmt::format(" ({} layers of {} x {})", o.layers, o.width, o.width));
    fmt::print(
        "| schedule | m | theory | simulated | measured mean | worst rank | F / B / W ms | hop ms "
        "| "
        "step ms | peak slots r0..r{} | peak MiB r0 "
        "|\n|---|---|---|---|---|---|---|---|---|---|---|\n",
        o.ranks - 1);
    for (int m : o.micro_batches) {
      for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B,
                                ScheduleKind::kInterleaved, ScheduleKind::kZbH1}) {
        const int v = kind == ScheduleKind::kInterleaved ? 2 : 1;
        const std::vector<RankResult> rs = run_config(o, stage_kind, kind, m);
        double mean = 0, worst = 0, wall = 0, f = 0, b = 0, w = 0, hop = 0;
        std::string slots;
        for (const RankResult& r : rs) {
          mean += r.bubble / rs.size();
          worst = std::max(worst, r.bubble);
          wall = std::max(wall, r.wall_ms);
          f += r.f_ms / rs.size();
          b += r.b_ms / rs.size();
          w += r.w_ms / rs.size();
          hop += r.hop_ms / rs.size();
          slots += (slots.empty() ? "" : ", ") + std::to_string(r.peak_slots);
        }
        const double theory = theoretical_bubble(kind, {o.ranks, m, v}, {f, b, w});
        // The same schedule on paper with the measured costs and each message taking a hop.
        const double simulated = simulate(build_schedule(kind, {o.ranks, m, v}),
                                          {.costs = {f, b, w}, .comm_latency = hop})
                                     .mean_bubble();
        const std::string name =
            kind == ScheduleKind::kInterleaved ? "interleaved (v=2)" : schedule_kind_name(kind);
        fmt::print(
            "| {} | {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.1f} / {:.1f} / {:.1f} | "
            "{:.2f} | {:.0f} | {} | {:.2f} |\n",
            name, m, theory, simulated, mean, worst, f, b, w, hop, wall, slots,
            static_cast<double>(rs[0].peak_bytes) / (1 << 20));
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace brigade

int main(int argc, char** argv) {
  return brigade::run(argc, argv);
}
