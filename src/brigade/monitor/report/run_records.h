#pragma once
// What a run report reads of one run folder: the metrics records that count (superseded ones
// skipped), by type, the resolved config, the provenance manifest, and where segments start.
// Everything is read as untrusted: bounded files, bounded JSON, unparsable lines skipped.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace brigade {

struct RunRecords {
  std::string name;    // the run folder's name, the label of its curves
  std::string folder;  // the path given
  std::vector<nlohmann::json> train, eval;
  std::vector<nlohmann::json> rounds;  // a federation's coordinator: one record per round
  nlohmann::json summary;              // the last summary record, or null
  std::vector<int64_t> resume_steps;   // step of every "resume" event
  std::string config_toml;             // config.toml, "" when absent
  nlohmann::json manifest;             // manifest.json (provenance), or null
  double first_time_s = 0;             // the first record's time, seconds since the epoch
};

// Reads run folder `folder` (runs/<name>). Throws IoError when it has no metrics.jsonl.
RunRecords read_run_records(const std::string& folder);

// Seconds since the epoch of a record's "time" ("2026-12-01T21:50:03.127Z"), or NaN.
double record_time_s(const nlohmann::json& record);

}  // namespace brigade
