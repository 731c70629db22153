#include "brigade/ckpt/sharded_save.h"

#include <chrono>
#include <limits>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/json_limits.h"
#include "brigade/ckpt/json_exchange.h"

namespace brigade {

namespace {

// Step 1: this rank's shard file; data[j] holds written()[j]'s bytes. Returns the report for
// the gather.
nlohmann::json write_shard(const ShardPlan& plan, const std::string& staging,
                           std::span<const void* const> data) {
  nlohmann::json report = {{"file", plan.file_name()}, {"error", ""}};
  if (plan.file_name().empty()) return report;  // everything it holds is written by others
  try {
    std::vector<StTensorView> views;
    views.reserve(plan.written().size());
    for (size_t j = 0; j < plan.written().size(); ++j) {
      const ShardPlan::Written& w = plan.written()[j];
      views.push_back(StTensorView{.name = w.key,
                                   .dtype = plan.pieces()[w.piece].dtype,
                                   .shape = w.region.count,
                                   .data = data[j],
                                   .nbytes = w.nbytes});
    }
    make_dirs(staging);
    const FileDigest d = write_safetensors(staging + "/" + plan.file_name(), views);
    fsync_dir(staging);  // each rank, so the name is durable on its own node too
    report["bytes"] = d.bytes;
    report["crc32"] = d.crc32;
  } catch (const Error& e) {
    report["error"] = e.what();
  }
  return report;
}

// Step 3 on rank 0: checks every report and commits. Returns "" or why not.
std::string commit_on_rank0(const ShardPlan& plan, const std::string& root, int64_t step,
                            const CheckpointOptions& options, const std::vector<std::string>& texts,
                            const nlohmann::json& state, std::string* dir) {
  ShardIndex index = plan.index();
  std::vector<std::pair<std::string, FileDigest>> files;
  std::string failures;
  for (size_t r = 0; r < texts.size(); ++r) {
    const std::string who = "rank " + std::to_string(r);
    try {
      const nlohmann::json rep = parse_json_bounded(texts[r], who + "'s report");
      const std::string error = rep.at("error").get<std::string>();
      if (!error.empty()) {
        failures += (failures.empty() ? "" : "; ") + who + ": " + error;
        continue;
      }
      index.rank_state.push_back(rep.at("rank_state"));
      const std::string file = rep.at("file").get<std::string>();
      if (file.empty()) continue;
      if (file != shard_file_name(static_cast<int>(r))) {
        failures += (failures.empty() ? "" : "; ") + who + " reported file '" + file + "'";
        continue;
      }
      const int64_t bytes = rep.at("bytes").get<int64_t>();
      const uint64_t crc = rep.at("crc32").get<uint64_t>();
      if (bytes < 0 || crc > std::numeric_limits<uint32_t>::max()) {
        throw std::invalid_argument("bad digest " + json_excerpt(rep));
      }
      files.emplace_back(file, FileDigest{bytes, static_cast<uint32_t>(crc)});
    } catch (const std::exception& e) {  // a malformed report (JSON or value errors)
      failures += (failures.empty() ? "" : "; ") + who + ": malformed report: " + e.what();
    }
  }
  if (!failures.empty()) return failures;
  try {
    CheckpointWriter writer(root, step, options, CheckpointWriter::Staging::kShared);
    for (const auto& [file, digest] : files) writer.add_file_record(file, digest);
    writer.set_sharding(index.to_json());
    *dir = writer.commit(state);
  } catch (const Error& e) {
    return std::string("rank 0 (commit): ") + e.what();
  }
  return "";
}

}  // namespace

ShardedCheckpointSaver::ShardedCheckpointSaver(std::string root, Communicator& comm,
                                               std::vector<ShardPiece> pieces, nlohmann::json mesh,
                                               CheckpointOptions options)
    : root_(std::move(root)),
      comm_(comm),
      options_(options),
      plan_(ShardPlan::build(comm, std::move(pieces), std::move(mesh),
                             options.split_replicated_bytes)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

SaveResult ShardedCheckpointSaver::save(int64_t step, std::span<const void* const> data,
                                        const nlohmann::json& state,
                                        const nlohmann::json& rank_state) {
  BRIGADE_CHECK(data.size() == plan_.pieces().size())
      << data.size() << " data pointers for " << plan_.pieces().size() << " pieces";
  std::vector<const void*> written;
  written.reserve(plan_.written().size());
  for (const ShardPlan::Written& w : plan_.written()) {
    written.push_back(static_cast<const char*>(data[w.piece]) + w.offset);
  }
  return save_written(step, written, state, rank_state);
}

SaveResult ShardedCheckpointSaver::save_written(int64_t step, std::span<const void* const> data,
                                                const nlohmann::json& state,
                                                const nlohmann::json& rank_state) {
  BRIGADE_CHECK(step >= 0) << "step " << step;
  BRIGADE_CHECK(data.size() == plan_.written().size())
      << data.size() << " data pointers for " << plan_.written().size() << " written pieces";
  const auto start = std::chrono::steady_clock::now();
  SaveResult result;
  result.step = step;
  const std::string staging = root_ + "/" + step_dir_name(step) + ".tmp";
  nlohmann::json report = write_shard(plan_, staging, data);
  report["rank_state"] = rank_state;
  try {
    const std::vector<std::string> texts = all_gather_strings(comm_, report.dump());
    nlohmann::json outcome;
    if (comm_.rank() == 0) {
      std::string dir;
      const std::string error = commit_on_rank0(plan_, root_, step, options_, texts, state, &dir);
      outcome = {{"error", error}, {"dir", dir}};
    }
    outcome = parse_json_bounded(broadcast_string(comm_, outcome.dump(), 0), "rank 0's outcome");
    result.error = outcome.at("error").get<std::string>();
    result.dir = outcome.at("dir").get<std::string>();
    result.ok = result.error.empty();
  } catch (const CommError& e) {
    result.error = e.what();
  } catch (const std::exception& e) {  // IoError from the parser, or a JSON type error
    result.error = std::string("malformed outcome from rank 0: ") + e.what();
  }
  if (!result.ok) {
    result.error = "checkpoint step " + std::to_string(step) + " not saved: " + result.error;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace brigade
