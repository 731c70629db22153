// metrics.jsonl's record fields (time, type, segment) and the marking of superseded records when
// a run resumes from an earlier step, against hand-written files; the time format against a
// date computed independently (Python's datetime: 1764625803.127 s is 2025-12-01T21:50:03.127Z).
#include "brigade/monitor/metrics.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "brigade/base/file_io.h"
#include "brigade/monitor/summary_table.h"
#include "brigade/monitor/utc_time.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

std::vector<nlohmann::json> records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(UtcTime, Iso8601WithMilliseconds) {
  using namespace std::chrono;
  EXPECT_EQ(utc_iso8601(system_clock::time_point{}), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(utc_iso8601(system_clock::time_point{milliseconds(1764625803127)}),
            "2025-12-01T21:50:03.127Z");
}

TEST(Metrics, EveryRecordHasTimeTypeAndSegment) {
  testing::TempDir dir;
  const std::string path = dir / "metrics.jsonl";
  {
    MetricsWriter w(path);
    EXPECT_EQ(w.segment(), 0);
    ASSERT_TRUE(w.begin_segment(0));
    ASSERT_TRUE(w.write("train", {{"step", 1}, {"loss", 2.5}}));
  }
  const auto r = records(path);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["type"], "event");
  EXPECT_EQ(r[0]["event"], "start");
  EXPECT_EQ(r[1]["type"], "train");
  EXPECT_EQ(r[1]["segment"], 0);
  EXPECT_EQ(r[1]["loss"], 2.5);
  const std::regex iso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  for (const auto& x : r) EXPECT_TRUE(std::regex_match(x["time"].get<std::string>(), iso)) << x;
}

// Segment 0 reached step 6 but its last checkpoint was step 4: segment 1 resumes at 4, and the
// records of steps 5 and 6 (and their eval) of segment 0 are marked; nothing else changes.
TEST(Metrics, ResumeMarksTheStepsTrainedAgain) {
  testing::TempDir dir;
  const std::string path = dir / "metrics.jsonl";
  {
    MetricsWriter w(path);
    w.begin_segment(0);
    for (int s = 1; s <= 6; ++s) w.write("train", {{"step", s}});
    w.write("eval", {{"step", 6}, {"val_loss", 3.0}});
  }
  std::ofstream(path, std::ios::app) << "{\"step\": 7, \"loss\"";  // a torn last line
  {
    MetricsWriter w(path);
    EXPECT_EQ(w.segment(), 1);
    ASSERT_TRUE(w.begin_segment(4, {{"checkpoint", "ck/step_00000004"}}));
    for (int s = 5; s <= 8; ++s) w.write("train", {{"step", s}});
  }
  const std::string text = read_file(path);
  EXPECT_NE(text.find("{\"step\": 7, \"loss\"\n"), std::string::npos);  // kept as it was
  std::map<int, int> live;  // step -> train records that count
  int superseded = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("{\"step\": 7", 0) == 0) continue;
    const auto j = nlohmann::json::parse(line);
    if (j.value("superseded", false)) {
      ++superseded;
      EXPECT_EQ(j["segment"], 0);
      EXPECT_GT(j["step"].get<int>(), 4);
      continue;
    }
    if (j["type"] == "train") ++live[j["step"].get<int>()];
    if (j["type"] == "event" && j["segment"] == 1) {
      EXPECT_EQ(j["event"], "resume");
      EXPECT_EQ(j["step"], 4);
      EXPECT_EQ(j["checkpoint"], "ck/step_00000004");
    }
  }
  EXPECT_EQ(superseded, 3);  // steps 5, 6 and the eval at 6
  EXPECT_EQ(live,
            (std::map<int, int>{{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}, {8, 1}}));
}

// A torn last line and nothing to mark: the next record still starts a line of its own.
TEST(Metrics, TornLastLineDoesNotSwallowTheNextRecord) {
  testing::TempDir dir;
  const std::string path = dir / "metrics.jsonl";
  std::ofstream(path) << "{\"step\": 1}\n{\"step\": 2, \"lo";
  {
    MetricsWriter w(path);
    ASSERT_TRUE(w.begin_segment(2));
  }
  std::istringstream in(read_file(path));
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], "{\"step\": 2, \"lo");
  EXPECT_EQ(nlohmann::json::parse(lines[2])["event"], "resume");
}

TEST(SummaryTable, AlignsKeysAndRoundsNumbers) {
  const nlohmann::json s = {{"val_loss", 4.862173080444336},
                            {"final", true},
                            {"wall_s", 0.000123},
                            {"busy_ms_per_rank", {4.0978, 3.8051}},
                            {"comm", "all_reduce: 9 calls\nbroadcast: 2 calls\n"}};
  const std::vector<std::string> rows = summary_table(s);
  const std::vector<std::string> want = {"  busy_ms_per_rank  [4.0978, 3.8051]",
                                         "  comm:",
                                         "    all_reduce: 9 calls",
                                         "    broadcast: 2 calls",
                                         "  final             true",
                                         "  val_loss          4.8622",
                                         "  wall_s            0.000123"};
  EXPECT_EQ(rows, want);
}

}  // namespace
}  // namespace brigade
