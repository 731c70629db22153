#include "brigade/runtime/run_folder.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/base/host.h"

namespace brigade {

namespace {

// First line printed by a shell command, or "" (used only for provenance: best effort).
std::string command_output(const std::string& command) {
  std::string out;
  if (std::FILE* pipe = popen(command.c_str(), "r")) {
    std::array<char, 256> buf{};
    while (std::fgets(buf.data(), buf.size(), pipe)) out += buf.data();
    pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf.data();
}

}  // namespace

RunFolder run_folder_of(const Config& config) {
  return RunFolder{config.run.out_dir + "/" + config.run.name};
}

RunFolder create_run_folder(const Config& config, int rank) {
  RunFolder folder = run_folder_of(config);
  // run.resume = "never" starts afresh: on a folder that already holds a run it would replace
  // `latest` and append to the old metrics, so it is refused, naming the ways out. Rank 0 owns
  // that decision: another rank may start after rank 0 has begun the new run's metrics (a
  // federated client joining late does).
  std::error_code ec;
  const bool has_checkpoint = std::filesystem::exists(folder.checkpoints() + "/latest", ec);
  const auto metrics_bytes = std::filesystem::file_size(folder.metrics_path(), ec);
  if (rank == 0 && config.run.resume == ResumeMode::kNever &&
      (has_checkpoint || (!ec && metrics_bytes > 0))) {
    throw ConfigError(fmt::format(
        "run.resume = \"never\": {} already holds a run ({}); choose another run.name or "
        "run.out_dir, delete the folder, or set run.resume = \"auto\" to continue it",
        folder.root, has_checkpoint ? "checkpoints/latest" : "metrics.jsonl"));
  }
  make_dirs(folder.checkpoints());
  make_dirs(folder.root + "/logs");
  if (rank == 0) write_file_atomic(folder.config_path(), config.to_toml());
  return folder;
}

std::string source_git_commit() {
  const std::string commit =
      command_output("git -C '" + std::string(BRIGADE_SOURCE_DIR) + "' rev-parse HEAD 2>/dev/null");
  return commit.empty() ? "unknown" : commit;
}

nlohmann::json provenance(const Config& config, const std::vector<std::string>& data_files) {
  const std::string src = BRIGADE_SOURCE_DIR;
  const std::string commit = source_git_commit();
  std::string dirty =
      command_output("git -C '" + src + "' status --porcelain 2>/dev/null | head -1");
  nlohmann::json data = nlohmann::json::array();
  for (const auto& path : data_files) {
    FileDigest d = digest_file(path);
    data.push_back({{"path", path}, {"bytes", d.bytes}, {"crc32", fmt::format("{:08x}", d.crc32)}});
  }
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  std::string resolved = config.to_toml();
  return {
      {"brigade_version", "0.1.0"},
      {"git_commit", commit},
      {"git_dirty", !dirty.empty()},
      {"config_crc32", fmt::format("{:08x}", crc32_of(resolved))},
      {"data_files", data},
      {"cpu", cpu_model_name()},
      {"cores", sysconf(_SC_NPROCESSORS_ONLN)},
      {"build_type", BRIGADE_BUILD_TYPE},
      {"host", host.data()},
      {"started_utc", utc_now()},
  };
}

void write_run_manifest(const RunFolder& folder, const nlohmann::json& manifest) {
  write_file_atomic(folder.manifest_path(), manifest.dump(2) + "\n");
}

std::string segment_dir(const RunFolder& folder, int64_t start_step) {
  return fmt::format("{}/segments/from_step_{:08d}", folder.root, start_step);
}

void write_segment_record(const RunFolder& folder, int64_t start_step, const Config& config,
                          const nlohmann::json& manifest) {
  const std::string dir = segment_dir(folder, start_step);
  make_dirs(dir);
  write_file_atomic(dir + "/config.toml", config.to_toml());
  write_file_atomic(dir + "/manifest.json", manifest.dump(2) + "\n");
}

}  // namespace brigade
