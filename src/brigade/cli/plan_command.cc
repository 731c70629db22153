// brigade plan CONFIG --cluster CLUSTER.toml: predicts every layout of the config's GPT on the
// cluster (plan/layout_search.h), prints the best --top of those that fit with their memory and
// step time by part, says why the others lost, and writes the best as a ready config with its
// launch command. --calibrate measures this machine into a cluster file instead
// (plan/calibrate.h). docs/planning.md.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/cli/commands.h"
#include "brigade/plan/calibrate.h"
#include "brigade/plan/layout_search.h"
#include "brigade/runtime/config.h"

namespace brigade::cli {

namespace {

struct PlanArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string cluster;
  int top = 5;
  int64_t global_batch = 0;
  std::vector<int64_t> diloco_h;
  bool as_is = false;
  std::string write;
  bool calibrate = false;
  int64_t nproc = 0;
  std::string out;
  bool json = false;
};

double mib(double bytes) {
  return bytes / (1 << 20);
}

nlohmann::json prediction_json(const Candidate& c) {
  const Prediction& p = c.prediction;
  const MemoryPrediction& m = p.memory;
  const TimePrediction& t = p.time;
  return {{"layout", c.label()},
          {"fits", c.fits},
          {"why_not", c.why_not},
          {"memory_mib",
           {{"weights", mib(m.weights)},
            {"gradients", mib(m.gradients)},
            {"optimizer", mib(m.optimizer)},
            {"activations", mib(m.activations)},
            {"buffers", mib(m.buffers)},
            {"overhead", mib(m.overhead)},
            {"total", mib(m.total())}}},
          {"time_ms",
           {{"compute", 1e3 * t.compute},
            {"tp_comm", 1e3 * t.tp_comm},
            {"bubble", 1e3 * t.bubble},
            {"dp_exposed", 1e3 * t.dp_exposed},
            {"optimizer", 1e3 * t.optimizer},
            {"step", 1e3 * t.step}}},
          {"tokens_per_s", p.tokens_per_s},
          {"mfu", p.mfu},
          {"joules_per_token", p.joules_per_token},
          {"bytes_per_step", {{"dp", p.dp_bytes}, {"tp", p.tp_bytes}, {"pp", p.pp_bytes}}}};
}

void print_table(const SearchResult& r, const ClusterSpec& cluster, int top) {
  std::printf(
      "%lld layouts predicted for %lld processes (%lld node(s) x %lld), global batch %lld "
      "examples; %lld refused by the job checks\n\n",
      static_cast<long long>(r.ranked.size()), static_cast<long long>(cluster.world()),
      static_cast<long long>(cluster.nodes), static_cast<long long>(cluster.processes_per_node),
      static_cast<long long>(r.global_batch), static_cast<long long>(r.refused));
  std::printf("%-4s %-66s %9s %9s %9s %8s %8s %8s %8s %10s %6s\n", "#", "layout", "mem MiB",
              "step ms", "compute", "tp", "bubble", "dp wait", "optim", "tokens/s", "MFU");
  int shown = 0;
  for (const Candidate& c : r.ranked) {
    if (shown >= top) break;
    const Prediction& p = c.prediction;
    std::printf("%-4d %-66s %9.1f %9.1f %9.1f %8.1f %8.1f %8.1f %8.1f %10.0f %5.1f%%\n", ++shown,
                c.label().c_str(), mib(p.memory.total()), 1e3 * p.time.step, 1e3 * p.time.compute,
                1e3 * p.time.tp_comm, 1e3 * p.time.bubble, 1e3 * p.time.dp_exposed,
                1e3 * p.time.optimizer, p.tokens_per_s, 100 * p.mfu);
  }
  std::printf("\nwhy not the others (%d shown):\n",
              std::min<int>(top, std::max<int>(0, static_cast<int>(r.ranked.size()) - 1)));
  int said = 0;
  for (const Candidate& c : r.ranked) {
    if (c.why_not.empty()) continue;
    if (said++ >= top) break;
    std::printf("  %s: %s\n", c.label().c_str(), c.why_not.c_str());
  }
  if (!r.refusals.empty()) {
    std::printf("refused before prediction:\n");
    for (const auto& [reason, n] : r.refusals) {
      std::printf("  %lld x %s\n", static_cast<long long>(n), reason.c_str());
    }
  }
}

int run_plan(const PlanArgs& a) {
  Config config = load_config(a.config, a.overrides);
  config.validate();
  if (a.calibrate) {
    const ClusterSpec c = calibrate_this_machine(config, a.nproc, [](const std::string& line) {
      std::fprintf(stderr, "%s\n", line.c_str());
    });
    const std::string text = "# brigade plan --calibrate on this machine\n" + c.to_toml();
    if (a.out.empty()) {
      std::fputs(text.c_str(), stdout);
    } else {
      write_file_atomic(a.out, text);
      std::fprintf(stderr, "wrote %s\n", a.out.c_str());
    }
    return 0;
  }
  if (a.cluster.empty()) {
    throw ConfigError(
        "--cluster FILE is required (a cluster description; brigade plan "
        "--calibrate writes one for this machine)");
  }
  const ClusterSpec cluster = load_cluster(a.cluster);
  const SearchResult r = search_layouts(
      config, cluster,
      {.global_batch = a.global_batch, .diloco_inner_steps = a.diloco_h, .as_is = a.as_is});
  if (a.json) {
    nlohmann::json out = {{"global_batch", r.global_batch},
                          {"world", cluster.world()},
                          {"refused", r.refused},
                          {"layouts", nlohmann::json::array()}};
    for (size_t i = 0; i < r.ranked.size() && static_cast<int>(i) < a.top; ++i)
      out["layouts"].push_back(prediction_json(r.ranked[i]));
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    print_table(r, cluster, a.top);
  }
  if (r.ranked.empty() || !r.ranked.front().fits) {
    const std::string smallest =
        r.ranked.empty() ? "" : fmt::format(" (the smallest: {})", r.ranked.front().why_not);
    throw ConfigError(fmt::format("no layout of {} fits {:.2f} GiB per process{}", a.config,
                                  cluster.memory_bytes_per_process() / (1 << 30), smallest));
  }
  const Candidate& best = r.ranked.front();
  if (!a.write.empty()) {
    write_file_atomic(a.write, "# brigade plan: " + best.label() + "\n" + best.config.to_toml());
    const std::string launch =
        cluster.nodes > 1 ? fmt::format(
                                "brigade launch --nnodes {} --nproc-per-node {} --node-rank R "
                                "--master-addr HOST -- train {}",
                                cluster.nodes, cluster.processes_per_node, a.write)
                          : fmt::format("brigade launch --nproc {} -- train {}",
                                        cluster.processes_per_node, a.write);
    std::fprintf(a.json ? stderr : stdout, "\nwrote %s; run it with:\n  %s\n", a.write.c_str(),
                 launch.c_str());
  }
  return 0;
}

}  // namespace

Command add_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* sub = app.add_subcommand(
      "plan", "predict every layout's memory and step time on a cluster, and pick the best");
  sub->add_option("config", a->config, "TOML config of the job (its model and global batch)")
      ->required();
  add_set_option(sub, a->overrides);
  sub->add_option("--cluster", a->cluster, "cluster description (docs/planning.md)");
  sub->add_option("--top", a->top, "layouts to show")->check(CLI::Range(1, 1000));
  sub->add_option("--global-batch", a->global_batch,
                  "examples per step (default: the config's micro_batch x grad_accum x replicas)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  sub->add_option("--diloco-h", a->diloco_h,
                  "also consider DiLoCo with this many inner steps (repeat for several)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_flag("--as-is", a->as_is, "predict the config's own layout only");
  sub->add_option("--write", a->write, "write the best layout as a ready config here");
  sub->add_flag("--json", a->json, "print the predictions as JSON");
  sub->add_flag("--calibrate", a->calibrate,
                "measure this machine into a cluster file (stdout, or --out)");
  sub->add_option("--nproc", a->nproc, "--calibrate: processes the job runs on this machine")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  sub->add_option("--out", a->out, "--calibrate: the cluster file to write");
  sub->footer(
      "Example: brigade plan --calibrate configs/tiny.toml --nproc 4 --out cluster.toml\n"
      "         brigade plan configs/tiny.toml --cluster cluster.toml --top 5 --write plan.toml");
  return [a]() { return run_plan(*a); };
}

}  // namespace brigade::cli
