// CheckpointWriter: stage files in step_N.tmp/, then commit by manifest + rename + `latest`.
// The protocol and its crash guarantees are described in checkpoint.h.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/ckpt/checkpoint.h"

namespace brigade {

namespace fs = std::filesystem;

namespace {

void warn(const std::string& msg) {
  std::fprintf(stderr, "[rank %d] warning: %s\n", detail::log_rank(), msg.c_str());
}

std::string join(const std::string& dir, const std::string& name) {
  return dir + "/" + name;
}

}  // namespace

CheckpointWriter::CheckpointWriter(std::string root, int64_t step, CheckpointOptions options,
                                   Staging staging)
    : root_(std::move(root)), step_(step), options_(options), staging_mode_(staging) {
  BRIGADE_CHECK(step >= 0) << "step " << step;
  BRIGADE_CHECK(options.keep_last >= 0) << "keep_last " << options.keep_last;
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  final_ = join(root_, step_dir_name(step));
  staging_ = final_ + ".tmp";
  manifest_.step = step;
  make_dirs(root_);
  if (staging_mode_ == Staging::kFresh) remove_all(staging_);  // left by a crash at this step
  make_dirs(staging_);
}

FileDigest CheckpointWriter::add_file(const std::string& filename,
                                      const std::vector<TensorRef>& tensors,
                                      const StMetadata& metadata) {
  BRIGADE_CHECK(!committed_) << "add_file after commit";
  BRIGADE_CHECK(is_checkpoint_file_name(filename) && !manifest_.files.count(filename))
      << "bad or duplicate checkpoint file name '" << filename << "'";
  std::vector<StTensorView> views;
  views.reserve(tensors.size());
  for (const TensorRef& t : tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) {
      BRIGADE_CHECK(d >= 0 && !__builtin_mul_overflow(numel, d, &numel))
          << "tensor " << t.name << " has a bad shape";
    }
    views.push_back(StTensorView{.name = t.name,
                                 .dtype = StDtype::kF32,
                                 .shape = t.shape,
                                 .data = t.data,
                                 .nbytes = numel * 4});
  }
  const FileDigest digest = write_safetensors(join(staging_, filename), views, metadata);
  manifest_.files[filename] = digest;
  return digest;
}

void CheckpointWriter::add_file_record(const std::string& filename, FileDigest digest) {
  BRIGADE_CHECK(!committed_) << "add_file_record after commit";
  BRIGADE_CHECK(is_checkpoint_file_name(filename) && !manifest_.files.count(filename))
      << "bad or duplicate checkpoint file name '" << filename << "'";
  manifest_.files[filename] = digest;
}

void CheckpointWriter::set_sharding(nlohmann::json sharding) {
  BRIGADE_CHECK(!committed_) << "set_sharding after commit";
  manifest_.format_version = kShardedCheckpointFormatVersion;
  manifest_.sharding = std::move(sharding);
}

std::string CheckpointWriter::commit(const nlohmann::json& state) {
  BRIGADE_CHECK(!committed_) << "commit called twice for step " << step_;
  if (staging_mode_ == Staging::kShared) remove_unlisted_staged_files();
  manifest_.state = state;
  write_file_durable(join(staging_, kManifestFileName), sealed_manifest_text(manifest_));
  fsync_dir(staging_);

  // Saving a step that already has a folder (the run was rolled back to an earlier checkpoint
  // and reached this step again): set the old one aside; rename cannot replace a full folder.
  std::error_code ec;
  if (fs::exists(final_, ec)) {
    remove_all(final_ + ".replaced.tmp");
    rename_atomic(final_, final_ + ".replaced.tmp");
  }
  rename_atomic(staging_, final_);
  fsync_dir(root_);

  const std::string latest = join(root_, kLatestFileName);
  write_file_durable(latest + ".tmp", latest_file_text(step_));
  rename_atomic(latest + ".tmp", latest);
  fsync_dir(root_);
  committed_ = true;

  remove_stale_and_old();
  return final_;
}

// Files of an earlier failed attempt at this step (a rank that is no longer part of the job)
// would be harmless, since readers ignore unlisted files, but would waste space for as long
// as the checkpoint is kept. Best effort.
void CheckpointWriter::remove_unlisted_staged_files() const {
  std::error_code ec;
  std::vector<std::string> unlisted;
  for (const auto& entry : fs::directory_iterator(staging_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!manifest_.files.count(name)) unlisted.push_back(name);
  }
  for (const std::string& name : unlisted) {
    try {
      remove_all(join(staging_, name));
    } catch (const IoError& e) {
      warn(e.what());
    }
  }
}

// Best effort: the checkpoint is already committed, so a failure here is only reported.
void CheckpointWriter::remove_stale_and_old() const {
  std::vector<std::pair<int64_t, std::string>> committed;
  std::vector<std::string> stale;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_, ec)) {
    const std::string name = entry.path().filename().string();
    if (const auto s = parse_step_dir_name(name)) {
      if (*s <= step_) committed.emplace_back(*s, name);
    } else if (const auto t = parse_step_tmp_name(name)) {
      // Only steps up to ours: a later step's staging folder may be in use by an async save.
      if (*t <= step_) stale.push_back(name);
    }
  }
  if (ec) {
    warn("cannot list " + root_ + " to remove old checkpoints: " + ec.message());
    return;
  }
  std::sort(committed.rbegin(), committed.rend());  // newest first
  if (options_.keep_last > 0) {
    for (size_t i = static_cast<size_t>(options_.keep_last); i < committed.size(); ++i) {
      // Rename first, so a crash mid-delete never leaves a half-deleted step_* folder that
      // looks like a (corrupt) checkpoint.
      const std::string& name = committed[i].second;
      const std::string doomed = join(root_, name + ".deleting.tmp");
      try {
        rename_atomic(join(root_, name), doomed);
        stale.push_back(name + ".deleting.tmp");
      } catch (const IoError& e) {
        warn(std::string("cannot retire old checkpoint: ") + e.what());
      }
    }
  }
  for (const std::string& name : stale) {
    try {
      remove_all(join(root_, name));
    } catch (const IoError& e) {
      warn(e.what());
    }
  }
}

}  // namespace brigade
