#include "brigade/train/job_check.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/ckpt/manifest.h"
#include "brigade/data/idx_reader.h"
#include "brigade/data/input_files.h"
#include "brigade/data/text_corpus.h"
#include "brigade/optim/trainable_mask.h"
#include "brigade/runtime/run_folder.h"
#include "brigade/sync/lowcomm/quorum_exchange.h"
#include "brigade/train/checkpointing.h"
#include "brigade/train/job_plan.h"
#include "brigade/train/model_factory.h"
#include "brigade/train/sync_strategy.h"

namespace brigade {

namespace {

// With run.resume = "auto", the run folder's latest checkpoint (its manifest alone, so that the
// check costs nothing before processes start) against the job's sync method and replicas: a
// low-communication method's per-replica state resumes only the same method on as many
// replicas (check_sync_record). A folder with no checkpoint, or one whose latest does not
// parse, is left to the trainer (which falls back to an older one and says so).
void check_resume_fits(const Config& config, int64_t replicas) {
  if (config.run.resume != ResumeMode::kAuto) return;
  const std::string checkpoints = run_folder_of(config).checkpoints();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(checkpoints + "/latest", ec)) return;
  nlohmann::json state;
  std::string dir;
  try {
    const std::optional<std::string> name =
        parse_latest_file_text(read_file(checkpoints + "/latest", 4096));
    if (!name) return;
    dir = checkpoints + "/" + *name;
    const std::string path = dir + "/manifest.json";
    state = parse_manifest_text(read_file(path), path).state;
  } catch (const IoError&) {
    return;
  } catch (const CheckpointError&) {
    return;
  }
  check_sync_record(state, config, replicas, dir);
}

}  // namespace

JobPlan check_world_size(const Config& config, int64_t world_size) {
  JobPlan plan = plan_job(config, world_size);
  if (plan.roles != JobRoles::kReplicas) return plan;
  check_outer_quorum(config.sync, plan.sync_replicas);
  check_resume_fits(config, plan.sync_replicas);
  return plan;
}

void check_outer_quorum(const SyncConfig& s, int64_t replicas) {
  const bool krum = s.outer_aggregator == "krum" || s.outer_aggregator == "multi_krum";
  if (s.method != SyncKind::kDiloco || s.quorum >= 1.0 || !krum) return;
  const int required = quorum_required(s.quorum, static_cast<int>(replicas));
  if (required <= 2 * s.outer_byzantine + 2) {
    throw ConfigError(fmt::format(
        "sync.outer_aggregator = \"{}\" with sync.outer_byzantine = {} needs more than 2f + "
        "2 = {} replicas in every outer step; sync.quorum = {} of {} replicas guarantees {}",
        s.outer_aggregator, s.outer_byzantine, 2 * s.outer_byzantine + 2, s.quorum, replicas,
        required));
  }
}

namespace {

void require_folder(const std::string& dir, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw IoError(fmt::format("data.path = \"{}\": {} is not a folder{}", dir, what,
                              std::filesystem::exists(dir, ec) ? "" : " (it does not exist)"));
  }
}

// Whether dir holds a checkpoint to start from, judged by its manifests alone (a step folder, a
// checkpoints root or a run folder): cheap enough to run before any process starts; the
// checksums are verified when the checkpoint is read.
bool holds_a_checkpoint(const std::filesystem::path& dir) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir / "manifest.json", ec)) return true;
  const std::filesystem::path root =
      std::filesystem::is_directory(dir / "checkpoints", ec) ? dir / "checkpoints" : dir;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    if (parse_step_dir_name(entry.path().filename().string()) &&
        std::filesystem::is_regular_file(entry.path() / "manifest.json", ec)) {
      return true;
    }
  }
  return false;
}

}  // namespace

void check_data_paths(const Config& config) {
  const std::string& init_from = config.train.init_from;
  std::error_code ec;
  if (init_from.rfind(kHfSourcePrefix, 0) == 0) {
    const std::string dir = init_from.substr(std::string_view(kHfSourcePrefix).size());
    for (const char* f : {"config.json", "model.safetensors"}) {
      if (!std::filesystem::is_regular_file(dir + "/" + f, ec)) {
        throw IoError(fmt::format(
            "train.init_from = \"{}\": {}/{} is missing (hf:DIR names a Hugging Face GPT-2 folder, "
            "as `brigade export` writes it)",
            init_from, dir, f));
      }
    }
  } else if (!init_from.empty() && !std::filesystem::is_directory(init_from, ec)) {
    throw IoError(fmt::format(
        "train.init_from = \"{}\": no such folder (give a run folder, its checkpoints folder or "
        "one checkpoint, e.g. runs/NAME or runs/NAME/checkpoints/step_00000600)",
        init_from));
  } else if (!init_from.empty() && !holds_a_checkpoint(init_from)) {
    throw IoError(fmt::format(
        "train.init_from = \"{}\": the folder holds no checkpoint (no step_*/manifest.json in it "
        "or in its checkpoints/ folder); a run saves one every train.ckpt_every steps and at its "
        "end",
        init_from));
  }
  // A federation's clients read their own folders (fed.client_data), on their own hosts.
  if (config.sync.method == SyncKind::kFed && !config.fed.client_data.empty()) return;
  const DataConfig& data = config.data;
  if (data.source == DataSource::kFortunes) {
    require_folder(data.path.empty() ? kDefaultFortunesDir : data.path,
                   "the fortunes corpus (Debian package fortunes)");
  } else if (data.source == DataSource::kFashionMnist) {
    require_folder(data.path.empty() ? kDefaultFashionMnistDir : data.path,
                   "the Fashion-MNIST folder (Debian package dataset-fashion-mnist)");
  } else if (data.source == DataSource::kShards) {
    if (!data.path.empty()) require_folder(data.path, "the token-shard folder");
  } else if (!data.path.empty()) {  // text, jsonl: a file, a folder or a glob
    try {
      expand_input_files(data.path);
    } catch (const IoError& e) {
      throw IoError(fmt::format("data.path: {}", e.what()));
    }
  }
}

void check_freeze(const Config& config) {
  const std::vector<std::string> patterns = freeze_patterns(config);
  if (patterns.empty()) return;
  check_freeze_patterns(model_param_layout(config.model), patterns);
}

}  // namespace brigade
