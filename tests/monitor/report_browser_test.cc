// `brigade report` end to end, in a real browser: two runs (one process resumed once, and two
// ranks) are trained through the CLI, reported into one HTML file, and opened by headless
// Chromium (Debian's, installed by scripts/install-deps.sh). The page's own script writes what
// the browser laid out into #render-check; the test requires every chart to have rendered with
// a size, the loss curves to hold exactly the losses of each run's metrics.jsonl (superseded
// records excluded, read here independently), the breakdown to have a bar per part and step,
// and a resume marker at the resumed step. It also takes a screenshot, which must not be empty.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "brigade/base/file_io.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

const std::string kChromium =
    "chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
    "--disable-background-networking --disable-component-update --disable-sync ";

// "1 5.52 2 5.43 ..." -> {(1, 5.52), (2, 5.43), ...}
std::vector<std::pair<double, double>> pairs_of(const std::string& values) {
  std::istringstream in(values);
  std::vector<std::pair<double, double>> out;
  double x, y;
  while (in >> x >> y) out.emplace_back(x, y);
  return out;
}

// (step, loss) of the train records that count, from metrics.jsonl itself.
std::vector<std::pair<double, double>> losses_of(const std::string& run) {
  std::vector<std::pair<double, double>> out;
  std::istringstream in(read_file(run + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "train" && !j.value("superseded", false)) {
      out.emplace_back(j["step"].get<double>(), j["loss"].get<double>());
    }
  }
  return out;
}

TEST(ReportBrowser, EveryChartRendersWithTheRunsData) {
  const std::string dir = make_temp_dir("report");
  const std::string config = dir + "/tiny.toml";
  std::ofstream(config) << testing::tiny_gpt_config({{"train.steps", "8"},
                                                     {"train.eval_every", "4"},
                                                     {"train.ckpt_every", "3"},
                                                     {"train.micro_batch", "2"}});
  const std::string bin = BRIGADE_BINARY;
  const std::string train = " -- train " + config + " --set run.out_dir=" + dir;
  // Run "one": stops after 5 (checkpoint at 5), resumes from it; run "two": 2 ranks.
  ASSERT_EQ(run_command(bin + " launch --nproc 1" + train +
                        " --set run.name='\"one\"' "
                        "--set run.stop_after=5")
                .exit_code,
            0);
  ASSERT_EQ(run_command(bin + " launch --nproc 1" + train + " --set run.name='\"one\"'").exit_code,
            0);
  ASSERT_EQ(run_command(bin + " launch --nproc 2" + train + " --set run.name='\"two\"'").exit_code,
            0);
  const std::string html = dir + "/report.html";
  const auto rep = run_command(bin + " report " + dir + "/one " + dir + "/two --out " + html);
  ASSERT_EQ(rep.exit_code, 0) << rep.output;

  const auto dom = run_command(
      kChromium + "--user-data-dir=" + dir + "/chrome --dump-dom file://" + html + " 2>/dev/null",
      60);
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  const std::string open = "<pre id=\"render-check\">";
  const size_t at = dom.output.find(open);
  ASSERT_NE(at, std::string::npos) << dom.output.substr(0, 2000);
  const size_t end = dom.output.find("</pre>", at);
  const auto charts =
      nlohmann::json::parse(dom.output.substr(at + open.size(), end - at - open.size()));

  std::map<std::string, nlohmann::json> by_id;
  for (const auto& c : charts) by_id[c["id"]] = c;
  for (const char* id : {"loss-step", "loss-time", "tokens", "mfu", "lr", "comm", "breakdown-0",
                         "breakdown-1", "comm-1", "busy-1"}) {
    ASSERT_TRUE(by_id.count(id)) << id << " not rendered: " << charts.dump();
    EXPECT_GT(by_id[id]["width"].get<double>(), 100) << id;
    EXPECT_GT(by_id[id]["height"].get<double>(), 100) << id;
  }
  std::map<std::string, std::vector<std::pair<double, double>>> drawn;
  for (const auto& s : by_id["loss-step"]["series"]) {
    EXPECT_EQ(s["points"].get<int>(), static_cast<int>(pairs_of(s["values"]).size()));
    drawn[s["label"]] = pairs_of(s["values"]);
  }
  const auto one = losses_of(dir + "/one"), two = losses_of(dir + "/two");
  EXPECT_EQ(one.size(), 8u);  // steps 1-5, then 6-8: nothing superseded here, each once
  EXPECT_EQ(drawn["one train"], one);
  EXPECT_EQ(drawn["two train"], two);
  EXPECT_EQ(drawn["one validation"].size(), 2u);  // steps 4 and 8
  // 8 parts x 8 steps of bars per breakdown; the busy chart has one bar per rank of run two.
  EXPECT_EQ(by_id["breakdown-1"]["rects"].get<int>(), 64);
  EXPECT_EQ(by_id["busy-1"]["rects"].get<int>(), 2);
  // Communication by axis and operation: one bar per step for every pair run two's records name.
  std::set<std::string> pairs;
  std::istringstream two_metrics(read_file(dir + "/two/metrics.jsonl"));
  for (std::string line; std::getline(two_metrics, line);) {
    const auto m = nlohmann::json::parse(line);
    if (m["type"] != "train") continue;
    for (const auto& [key, v] : m["comm_sent_by"].items()) pairs.insert(key);
  }
  EXPECT_TRUE(pairs.count("dp/all_reduce")) << "the gradients of two DDP ranks";
  EXPECT_EQ(by_id["comm-1"]["rects"].get<int>(), 8 * static_cast<int>(pairs.size()));
  // The resume of run one at step 5 is marked on the step charts.
  EXPECT_NE(read_file(html).find("class=\"marker\" data-x=\"5\""), std::string::npos);

  const std::string png = dir + "/report.png";
  ASSERT_EQ(run_command(kChromium + "--user-data-dir=" + dir +
                            "/chrome2 --window-size=800,3000 "
                            "--screenshot=" +
                            png + " file://" + html + " 2>/dev/null",
                        60)
                .exit_code,
            0);
  EXPECT_GT(std::filesystem::file_size(png), 50'000u);  // a blank page is a few KiB
}

}  // namespace
}  // namespace brigade
