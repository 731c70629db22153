#include "brigade/monitor/report/run_records.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <sstream>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/base/json_limits.h"

namespace brigade {

namespace {

constexpr int64_t kMaxMetricsBytes = int64_t{1} << 30;
constexpr int64_t kMaxSmallFileBytes = int64_t{16} << 20;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

double record_time_s(const nlohmann::json& r) {
  const auto it = r.find("time");
  if (it == r.end() || !it->is_string()) return std::numeric_limits<double>::quiet_NaN();
  std::tm tm{};
  int ms = 0;
  if (std::sscanf(it->get_ref<const std::string&>().c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ",
                  &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
                  &ms) != 7) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm)) + ms / 1000.0;
}

RunRecords read_run_records(const std::string& folder_in) {
  std::string folder = folder_in;
  while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
  RunRecords run;
  run.folder = folder;
  run.name = folder.substr(folder.find_last_of('/') + 1);
  const std::string metrics = folder + "/metrics.jsonl";
  if (!exists(metrics)) {
    throw IoError(metrics + ": not found (brigade report takes run folders, runs/<name>)");
  }
  std::istringstream in(read_file(metrics, kMaxMetricsBytes));
  bool first = true;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json r;
    try {
      r = parse_json_bounded(line, metrics, JsonLimits{.max_bytes = 1 << 24});
    } catch (const IoError&) {
      continue;  // a torn line of a crashed writer
    }
    if (!r.is_object() || r.value("superseded", false)) continue;
    if (first && std::isfinite(record_time_s(r))) {
      run.first_time_s = record_time_s(r);
      first = false;
    }
    const std::string type = r.value("type", r.contains("tokens_per_s") ? "train" : "");
    if (type == "train") {
      run.train.push_back(std::move(r));
    } else if (type == "eval" || (type.empty() && r.contains("val_loss") && !r.contains("final"))) {
      run.eval.push_back(std::move(r));
    } else if (type == "round") {
      run.rounds.push_back(std::move(r));
    } else if (type == "summary" || r.value("final", false)) {
      run.summary = std::move(r);
    } else if (type == "event" && r.value("event", "") == "resume") {
      run.resume_steps.push_back(r.value("step", int64_t{0}));
    }
  }
  if (exists(folder + "/config.toml")) {
    run.config_toml = read_file(folder + "/config.toml", kMaxSmallFileBytes);
  }
  if (exists(folder + "/manifest.json")) {
    try {
      run.manifest = parse_json_bounded(read_file(folder + "/manifest.json", kMaxSmallFileBytes),
                                        folder + "/manifest.json");
    } catch (const IoError&) {
    }
  }
  return run;
}

}  // namespace brigade
