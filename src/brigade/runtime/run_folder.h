#pragma once
// A run is a folder: <out_dir>/<name>/ holds the resolved config (config.toml), the
// provenance manifest (manifest.json), metrics.jsonl, the log (train.log), any tokenizer
// the run trained, and checkpoints/. Nothing a run produces lives elsewhere.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/runtime/config.h"

namespace brigade {

struct RunFolder {
  std::string root;
  std::string config_path() const { return root + "/config.toml"; }
  std::string manifest_path() const { return root + "/manifest.json"; }
  std::string metrics_path() const { return root + "/metrics.jsonl"; }
  std::string tensorboard_dir() const { return root + "/tb"; }
  std::string log_path() const { return root + "/train.log"; }  // rank 0
  std::string rank_log_path(int rank) const {
    return rank == 0 ? log_path() : root + "/logs/rank_" + std::to_string(rank) + ".log";
  }
  std::string checkpoints() const { return root + "/checkpoints"; }
  std::string tokenizer_path() const { return root + "/tokenizer.bpe"; }
};

// The folder of a config's run (not created).
RunFolder run_folder_of(const Config& config);

// Creates the folder (and logs/, checkpoints/); rank 0 also writes the resolved config.
// Throws IoError.
RunFolder create_run_folder(const Config& config, int rank = 0);

// The commit of the source tree this binary was built from (git rev-parse HEAD of
// BRIGADE_SOURCE_DIR), or "unknown" where that tree or git is not there.
std::string source_git_commit();

// Where the run came from: git commit (and whether the tree was dirty), the hash of the
// resolved config, size + CRC-32 of every data file, CPU model, build type, host, time.
nlohmann::json provenance(const Config& config, const std::vector<std::string>& data_files);

// Writes manifest.json atomically.
void write_run_manifest(const RunFolder& folder, const nlohmann::json& manifest);

// Every invocation (segment) of a run keeps its own resolved config and manifest, in
// <run>/segments/from_step_<start, 8 digits>/ (a segment started again from the same step
// replaces that folder's files): config.toml and manifest.json at the top describe only the
// latest.
std::string segment_dir(const RunFolder& folder, int64_t start_step);
void write_segment_record(const RunFolder& folder, int64_t start_step, const Config& config,
                          const nlohmann::json& manifest);

}  // namespace brigade
