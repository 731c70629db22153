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
//          overheads, independent of the cores available. B = W = F is the ZB paper's
//          simplification (a fused Backward then sleeps B + W = 2F, as 1F1B's analysis has it).
//          The default 80 ms per action keeps a message (~1-5 ms on a loaded 2-core machine) a
//          small fraction of the compute it separates; the bench says how small in "hop ms".
// The bubble is measured per rank as 1 - busy / step (busy: inside the stage's calls; step: from
// a barrier before to a barrier after the executor's step, so it ends with the slowest rank, as
// a training step does), the median over the timed steps ("measured", with "gap" = measured /
// theory - 1) and the mean over them ("mean of steps"), each then averaged over ranks; "worst
// rank" is the largest per-rank median; "gap (sim)" = measured / simulated - 1. The warm-up step
// sleeps 1/20 of the time. Theory for ZB-H1 uses the measured mean F, B and W costs. "simulated"
// runs the same action lists through the simulator with the measured costs and, per message, the
// measured hop time (a ring exchange of one activation): what the schedule should give once
// communication latency and wake-ups on this machine are counted.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
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
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/model/gpt_stage.h"
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
  int steps = 5;
  int64_t width = 1024;
  int layers = 16;
  int64_t micro_batch = 32;
  double sleep_ms = 80.0;  // per F, B and W of a whole stage (sleep stage)
  std::vector<std::string> stages = {"sleep"};
  std::vector<std::string> schedules = {"gpipe", "1f1b", "interleaved", "zb-h1"};
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
    std::this_thread::sleep_for(d_ * scale_);
    return 0.0f;
  }
  void backward_input(int, const float*, const float*, float*, float*) override {
    std::this_thread::sleep_for(d_ * scale_);
  }
  void backward_weight(int, const float*, const float*) override {
    std::this_thread::sleep_for(d_ * scale_);
  }
  // The warm-up step only needs the messages and buffers, not the compute.
  void set_scale(double scale) { scale_ = scale; }

 private:
  std::chrono::duration<double, std::milli> d_;
  double scale_ = 1.0;
  int64_t act_;
  bool first_, last_;
};

struct RankResult {
  double bubble = 0, bubble_mean = 0, wall_ms = 0, f_ms = 0, b_ms = 0, w_ms = 0, hop_ms = 0;
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
  std::vector<SleepStage*> sleeps;
  for (int c = 0; c < v; ++c) {
    const int s = c * p + rank;
    if (stage_kind == "sleep") {
      auto sleep = std::make_unique<SleepStage>(o.sleep_ms / v, o.micro_batch * o.width, s == 0,
                                                s == p * v - 1);
      sleeps.push_back(sleep.get());
      chunks.push_back(std::move(sleep));
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
  // Measured after every timed step, so it sees the machine's load of the steps.
  std::vector<float> hop_out(static_cast<size_t>(o.micro_batch * o.width)), hop_in(hop_out.size());
  const auto measure_hop_ms = [&] {
    const int64_t n = static_cast<int64_t>(hop_out.size() * sizeof(float));
    constexpr int kRounds = 10;
    comm->barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRounds; ++i) {
      auto s = comm->send_async(hop_out.data(), n, (rank + 1) % p, 1u << 30);
      auto rv = comm->recv_async(hop_in.data(), n, (rank + p - 1) % p, 1u << 30);
      s->wait();
      rv->wait();
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count() /
           kRounds;
  };
  std::vector<double> bubbles;
  for (int step = -1; step < o.steps; ++step) {  // step -1 warms the pool and the connections
    for (MlpStage* mlp : mlps) mlp->zero_grads();
    for (SleepStage* sleep : sleeps) sleep->set_scale(step < 0 ? 0.05 : 1.0);
    comm->barrier();
    const auto start = std::chrono::steady_clock::now();
    const StepStats st = exec.run_step();
    // The step ends when the last rank is done (the optimizer step waits for it): a rank that
    // finishes early idles until then.
    comm->barrier();
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step < 0) continue;
    r.hop_ms += measure_hop_ms() / o.steps;
    bubbles.push_back(1.0 - st.busy_s / wall_s);
    r.bubble_mean += bubbles.back() / o.steps;
    r.wall_ms += wall_s * 1e3 / o.steps;
    // Per action of one chunk (a rank runs m v of each).
    r.f_ms += st.forward_s * 1e3 / (o.steps * m * v);
    r.b_ms += st.input_grad_s * 1e3 / (o.steps * m * v);
    r.w_ms += st.weight_grad_s * 1e3 / (o.steps * m * v);
    r.peak_slots = st.peak_slots;
    r.peak_bytes = st.peak_bytes;
  }
  // The median step: a step during which another process held a core (this machine is shared)
  // says nothing about the schedule.
  std::sort(bubbles.begin(), bubbles.end());
  const size_t n = bubbles.size();
  r.bubble = n % 2 ? bubbles[n / 2] : (bubbles[n / 2 - 1] + bubbles[n / 2]) / 2;
  return r;
}

// What the sleep stage's B = W = F stands for: one real GPT stage (a middle one: blocks only) in
// this process, its F, B and W timed with the split backward and the fused backward (B+W in B).
void print_gpt_costs(int reps) {
  set_blas_threads(1);
  const GptConfig model{.vocab = 256, .seq_len = 128, .d_model = 256, .n_layer = 4, .n_head = 4};
  const int64_t B = 4;
  const auto time_ms = [](auto&& fn) {
    const auto t = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  fmt::print(
      "\nGPT stage, blocks [1, 3) of C = {}, T = {}, {} heads, micro-batch {}; median of {}\n",
      model.d_model, model.seq_len, model.n_head, B, reps);
  fmt::print(
      "| backward | F ms | B ms | W ms | B + W ms | saved MiB per micro-batch |\n"
      "|---|---|---|---|---|---|\n");
  for (const bool split : {false, true}) {
    GptStage stage(GptStageConfig{.model = model,
                                  .first_layer = 1,
                                  .end_layer = 3,
                                  .micro_batch = B,
                                  .split_backward = split});
    stage.initialize(1);
    std::vector<float> input(static_cast<size_t>(stage.input_floats()));
    std::vector<float> output(static_cast<size_t>(stage.output_floats())), dout(output.size());
    std::vector<float> dinput(input.size()), saved(static_cast<size_t>(stage.saved_floats()));
    fill_normal(input.data(), stage.input_floats(), 0.0f, 1.0f, 1, 1);
    fill_normal(dout.data(), stage.output_floats(), 0.0f, 1e-3f, 1, 2);
    std::vector<double> f, b, w;
    for (int r = 0; r <= reps; ++r) {  // r = 0 warms up
      const double tf =
          time_ms([&] { stage.forward(0, input.data(), output.data(), saved.data()); });
      const double tb = time_ms(
          [&] { stage.backward_input(0, input.data(), dout.data(), dinput.data(), saved.data()); });
      const double tw = time_ms([&] { stage.backward_weight(0, input.data(), saved.data()); });
      if (r == 0) continue;
      f.push_back(tf);
      b.push_back(tb);
      w.push_back(tw);
    }
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    fmt::print("| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n", split ? "split" : "fused",
               median(f), median(b), median(w), median(b) + median(w),
               static_cast<double>(stage.saved_floats()) * sizeof(float) / (1 << 20));
  }
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
        out << r.bubble << ' ' << r.bubble_mean << ' ' << r.wall_ms << ' ' << r.f_ms << ' '
            << r.b_ms << ' ' << r.w_ms << ' ' << r.hop_ms << ' ' << r.peak_slots << ' '
            << r.peak_bytes << '\n';
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
    in >> r.bubble >> r.bubble_mean >> r.wall_ms >> r.f_ms >> r.b_ms >> r.w_ms >> r.hop_ms >>
        r.peak_slots >> r.peak_bytes;
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
  app.add_option("--schedules", o.schedules, "subset of gpipe, 1f1b, interleaved, zb-h1");
  int gpt_reps = 0;
  app.add_option("--gpt-costs", gpt_reps,
                 "also time F, B, W of one real GPT stage (split and fused), median of N");
  CLI11_PARSE(app, argc, argv);

  fmt::print("p = {} ranks, {} hardware threads; micro-batch {} x width {}; {} timed steps\n",
             o.ranks, std::thread::hardware_concurrency(), o.micro_batch, o.width, o.steps);
  for (const std::string& stage_kind : o.stages) {
    fmt::print("\nstage: {}{}\n", stage_kind,
               stage_kind == "sleep"
                   ? fmt::format(" ({} ms per F, B, W of a stage)", o.sleep_ms)
                   : fmt::format(" ({} layers of {} x {})", o.layers, o.width, o.width));
    fmt::print(
        "| schedule | m | theory | simulated | measured | gap | gap (sim) | mean of steps | "
        "worst rank | F / B / W ms | hop ms | step ms | peak slots r0..r{} | peak MiB r0 "
        "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        o.ranks - 1);
    for (int m : o.micro_batches) {
      for (const std::string& schedule_name : o.schedules) {
        const ScheduleKind kind = parse_schedule_kind(schedule_name);
        const int v = kind == ScheduleKind::kInterleaved ? 2 : 1;
        const std::vector<RankResult> rs = run_config(o, stage_kind, kind, m);
        double mean = 0, mean_of_steps = 0, worst = 0, wall = 0, f = 0, b = 0, w = 0, hop = 0;
        std::string slots;
        for (const RankResult& r : rs) {
          mean += r.bubble / rs.size();
          mean_of_steps += r.bubble_mean / rs.size();
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
            "| {} | {} | {:.3f} | {:.3f} | {:.3f} | {:+.1f}% | {:+.1f}% | {:.3f} | {:.3f} | {:.1f} "
            "/ "
            "{:.1f} / {:.1f} | {:.2f} | {:.0f} | {} | {:.2f} |\n",
            name, m, theory, simulated, mean, 100.0 * (mean / theory - 1.0),
            100.0 * (mean / simulated - 1.0), mean_of_steps, worst, f, b, w, hop, wall, slots,
            static_cast<double>(rs[0].peak_bytes) / (1 << 20));
        std::fflush(stdout);
      }
    }
  }
  if (gpt_reps > 0) print_gpt_costs(gpt_reps);
  return 0;
}

}  // namespace
}  // namespace brigade

int main(int argc, char** argv) {
  return brigade::run(argc, argv);
}
