// monitor.trace_steps end to end: a 2-rank DDP run and a 2-stage pipeline write trace.json in
// the Chrome trace format, holding only the chosen steps, every rank as its own process, the
// blocks' forward and backward, the pipeline's actions and every collective with its bytes. On
// each thread spans must nest or follow each other, never overlap partially (what a timeline
// viewer needs to draw them as a stack).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "brigade/base/file_io.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

struct Span {
  double begin, end;
  std::string name;
};

nlohmann::json traced_run(const std::string& dir, const std::string& name,
                          const std::string& extra) {
  const std::string config = dir + "/tiny.toml";
  std::ofstream(config) << testing::tiny_gpt_config({{"train.steps", "5"},
                                                     {"train.micro_batch", "2"},
                                                     {"train.ckpt_every", "3"},
                                                     {"monitor.trace_steps", "[2, 3]"}});
  const auto r =
      run_command(std::string(BRIGADE_BINARY) + " launch --nproc 2 -- train " + config +
                  " --set run.out_dir=" + dir + " --set run.name='\"" + name + "\"' " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(read_file(dir + "/" + name + "/trace.json"));
}

// Spans of every (pid, tid) either nest or are disjoint; returns the names seen per pid.
std::map<int, std::set<std::string>> check_stacks(const nlohmann::json& trace) {
  std::map<std::pair<int, int>, std::vector<Span>> threads;
  std::map<int, std::set<std::string>> names;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const double ts = e.at("ts"), dur = e.at("dur");
    EXPECT_GE(dur, 0.0) << e.dump();
    threads[{e.at("pid"), e.at("tid")}].push_back({ts, ts + dur, e.at("name")});
    names[e.at("pid")].insert(e.at("name"));
  }
  constexpr double kSlack = 0.01;  // microseconds: the printed timestamps are rounded
  for (auto& [thread, spans] : threads) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.begin < b.begin || (a.begin == b.begin && a.end > b.end);
    });
    std::vector<const Span*> open;  // the stack of spans enclosing the current one
    for (const Span& s : spans) {
      while (!open.empty() && open.back()->end <= s.begin + kSlack) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(s.end, open.back()->end + kSlack)
            << s.name << " overlaps " << open.back()->name << " on pid " << thread.first << " tid "
            << thread.second;
      }
      open.push_back(&s);
    }
  }
  return names;
}

TEST(Trace, DataParallelStepsOfEveryRank) {
  const std::string dir = make_temp_dir("trace");
  const auto trace = traced_run(dir, "ddp", "");
  const auto names = check_stacks(trace);
  ASSERT_EQ(names.size(), 2u) << "both ranks";
  for (const auto& [pid, seen] : names) {
    for (const char* want : {"step 2", "step 3", "h.0 forward", "h.1 backward", "all_reduce",
                             "update (clip, optimizer)", "checkpoint (blocking part)"}) {
      EXPECT_TRUE(seen.count(want)) << want << " missing on rank " << pid;
    }
    EXPECT_FALSE(seen.count("step 1")) << "outside the window";
    EXPECT_FALSE(seen.count("step 4")) << "outside the window";
  }
  bool bytes = false;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("name", "") == "all_reduce" && e.contains("args")) {
      bytes |= e["args"].value("bytes_sent", int64_t{0}) > 0;
    }
  }
  EXPECT_TRUE(bytes) << "collectives carry their bytes";
}

TEST(Trace, PipelineActions) {
  const std::string dir = make_temp_dir("trace-pp");
  const auto names =
      check_stacks(traced_run(dir, "pp", "--set parallel.pp=2 --set train.grad_accum=2"));
  ASSERT_EQ(names.size(), 2u);
  for (const auto& [pid, seen] : names) {
    for (const char* want : {"F mb 0 chunk 0", "F mb 1 chunk 0", "send", "recv"}) {
      EXPECT_TRUE(seen.count(want)) << want << " missing on rank " << pid;
    }
  }
}

}  // namespace
}  // namespace brigade
