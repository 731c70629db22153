#pragma once
// The on-disk layout of a checkpoint root and the manifest that seals each checkpoint.
//
//   <root>/step_00000100/          one committed checkpoint
//            model.safetensors     data files: written by rank 0 (format 1), or one
//            rank_00003.safetensors  per rank (format 2, sharded: docs/checkpoints.md)
//            manifest.json         written last: {format_version, step, files: {name: {bytes,
//                                  crc32}}, state: <caller's JSON>, sharding: <format 2 only>}
//   <root>/step_00000200.tmp/      being written (or left by a crash); never read
//   <root>/latest                  "step_00000200\n": the newest committed checkpoint
//
// A checkpoint is valid only if its manifest parses and every file it lists has exactly the
// recorded size and CRC-32. Files not listed in the manifest are ignored.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "brigade/base/file_io.h"

namespace brigade {

// 1: whole tensors written by one rank. 2: per-rank shard files described by "sharding"
// (ckpt/shard_index.h). Readers accept both.
inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr int kShardedCheckpointFormatVersion = 2;
inline constexpr char kManifestFileName[] = "manifest.json";
inline constexpr char kLatestFileName[] = "latest";

// "step_00000100" (at least 8 digits).
std::string step_dir_name(int64_t step);

// The step of a committed checkpoint folder name ("step_00000100" -> 100); nullopt for anything
// else, including "step_00000100.tmp".
std::optional<int64_t> parse_step_dir_name(std::string_view name);

// The step of a temporary folder name: "step_<digits>[.<anything>].tmp" -> step, else nullopt.
// Covers the staging folder ("step_00000100.tmp") and folders set aside for deletion.
std::optional<int64_t> parse_step_tmp_name(std::string_view name);

// A name that can only mean a file directly inside the checkpoint folder: non-empty, no '/',
// not "." or "..", no NUL, not the manifest itself.
bool is_checkpoint_file_name(std::string_view name);

struct Manifest {
  int format_version = kCheckpointFormatVersion;
  int64_t step = 0;
  std::map<std::string, FileDigest> files;
  nlohmann::json state = nlohmann::json::object();
  // Format 2 only: which rank's file holds which piece of every tensor (an object, parsed and
  // validated by ShardIndex::from_json); null in format 1.
  nlohmann::json sharding;

  nlohmann::json to_json() const;
  // Parses and validates the structure (not the files). Throws CheckpointError naming `path`
  // and the offending key.
  static Manifest from_json(const nlohmann::json& j, const std::string& path);
};

}  // namespace brigade
