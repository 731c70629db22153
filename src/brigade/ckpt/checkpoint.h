#pragma once
// Saving and finding checkpoints (layout in ckpt/manifest.h).
//
// Commit protocol (crash-safe at every point; the folder rename is the commit):
//   1. data files are written into <root>/step_N.tmp/ and fsynced as they are added;
//   2. commit() writes manifest.json last, fsyncs it and the staging folder;
//   3. renames step_N.tmp -> step_N and fsyncs the root;
//   4. replaces <root>/latest atomically (latest.tmp, fsync, rename, fsync root);
//   5. best effort: deletes stale temporary folders and checkpoints beyond keep_last.
// A crash before 3 leaves only a *.tmp folder, which readers ignore and the next commit
// removes. A crash between 3 and 4 leaves `latest` on the previous checkpoint, which is valid.
//
// Sharded checkpoints (ckpt/sharded_save.h) use the same object on rank 0 only: every rank
// writes its shard into staging_dir() (Staging::kShared keeps their files), add_file_record()
// lists the files the others reported, set_sharding() stores the shard index, and commit()
// runs after they all finished. A CheckpointWriter object itself is not thread-safe.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "brigade/base/file_io.h"
#include "brigade/ckpt/manifest.h"
#include "brigade/ckpt/safetensors.h"

namespace brigade {

// A named f32 tensor in caller memory (row-major); must stay valid until add_file returns.
struct TensorRef {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

struct CheckpointOptions {
  // Committed checkpoints to keep, counting the new one; 0 keeps all. Only checkpoints with a
  // step at or below the new one are counted or deleted: newer folders belong to a run that
  // was rolled back and are left for a person to inspect.
  int keep_last = 3;
  // Sharded saves (sharded_save.h): a piece that several ranks hold identically and that is at
  // least this large is written in one block per holder (ShardPlan::kSplitBytes, 1 MiB), else
  // by the lowest holder alone.
  int64_t split_replicated_bytes = int64_t{1} << 20;
};

class CheckpointWriter {
 public:
  // What the constructor does with an existing staging folder for this step.
  enum class Staging {
    kFresh,   // remove it (a crash left it) and start empty: this object writes every file
    kShared,  // keep it: other ranks are writing their files into it; commit() then removes
              // any file in it that is not in the manifest (left by an earlier failed attempt)
  };

  // Creates <root> if needed and the staging folder <root>/step_N.tmp/. Throws IoError.
  CheckpointWriter(std::string root, int64_t step, CheckpointOptions options = {},
                   Staging staging = Staging::kFresh);

  // Writes `tensors` to <staging>/<filename> as safetensors (F32), fsyncs it and records its
  // digest. filename must be a plain file name, not yet added. Throws IoError.
  FileDigest add_file(const std::string& filename, const std::vector<TensorRef>& tensors,
                      const StMetadata& metadata = {});

  // Records a file that someone else (another rank, a background thread) wrote and fsynced in
  // staging_dir(), with the digest it computed while writing.
  void add_file_record(const std::string& filename, FileDigest digest);

  // Makes this a sharded (format 2) checkpoint whose manifest carries `sharding` (the JSON of a
  // ShardIndex, ckpt/shard_index.h).
  void set_sharding(nlohmann::json sharding);

  // Seals the checkpoint (steps 2-5 above) with `state` (config, sampler position, RNG,
  // provenance ...) stored verbatim in the manifest. Returns the committed folder. Call once.
  // Throws IoError; `latest` then still names the previous checkpoint, except when only the
  // final fsync of the root failed: `latest` already names the new, complete checkpoint, but
  // whether that survives a power loss is unknown. Either way `latest` names a valid one.
  std::string commit(const nlohmann::json& state);

  int64_t step() const { return step_; }
  const std::string& staging_dir() const { return staging_; }
  const std::string& final_dir() const { return final_; }

 private:
  void remove_stale_and_old() const;
  void remove_unlisted_staged_files() const;

  std::string root_;
  int64_t step_;
  CheckpointOptions options_;
  Staging staging_mode_;
  std::string staging_;
  std::string final_;
  Manifest manifest_;
  bool committed_ = false;
};

// A validated checkpoint folder. Tensor files are opened on first use; the object may be
// shared between threads.
// The checkpoint folder a user means by `path`: a checkpoint folder (step_N) itself, or the
// newest valid checkpoint of a run folder (path/checkpoints) or of a checkpoints root.
// Throws IoError if path does not exist, CheckpointError if it holds no valid checkpoint.
std::string resolve_checkpoint_dir(std::string path);

class CheckpointReader {
 public:
  // Validates <dir>: manifest.json parses, every listed file exists with the recorded size and
  // CRC-32 (every byte is read once). Throws CheckpointError naming the offending file.
  static CheckpointReader open(const std::string& dir);

  // The newest valid checkpoint under root: the one `latest` names, else every step_* folder,
  // newest first. Each rejected candidate is reported on stderr (one line naming the file and
  // the reason) and appended to *rejections if given. nullopt if root has no valid checkpoint
  // (or does not exist).
  static std::optional<CheckpointReader> open_latest_valid(
      const std::string& root, std::vector<std::string>* rejections = nullptr);

  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;
  ~CheckpointReader();

  int64_t step() const { return manifest_.step; }
  const std::string& dir() const { return dir_; }
  const nlohmann::json& state() const { return manifest_.state; }
  const Manifest& manifest() const { return manifest_; }

  // The safetensors file `filename` of this checkpoint. Throws CheckpointError if it is not in
  // the manifest or is malformed.
  const SafetensorsFile& file(const std::string& filename) const;

  // The manifest file holding tensor `name` (searching *.safetensors files), or nullopt.
  std::optional<std::string> find_tensor(const std::string& name) const;

  // Reads tensor `name` of `filename` into out, as f32. Throws CheckpointError unless the
  // stored shape equals `shape`; out must hold product(shape) floats.
  void read(const std::string& filename, const std::string& name, float* out,
            const std::vector<int64_t>& shape) const;

 private:
  struct Cache;
  CheckpointReader(std::string dir, Manifest manifest);

  std::string dir_;
  Manifest manifest_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace brigade
