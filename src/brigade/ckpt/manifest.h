#pragma once
// The on-disk layout of a checkpoint root and the manifest that seals each checkpoint.
//
//   <root>/step_00000100/          one committed checkpoint
//            model.safetensors     data files: written by rank 0 (format 1), or one
//            rank_00003.safetensors  per rank (format 2, sharded: docs/checkpoints.md)
//            manifest.json         written last: {format_version, step, files: {name: {bytes,
//                                  crc32}}, state: <caller's JSON>, sharding: <format 2, 3>,
//                                  manifest_crc32: the seal, see sealed_manifest_text()}
//   <root>/step_00000200.tmp/      being written (or left by a crash); never read
//   <root>/latest                  "step_00000200\ncrc32 0x...\n": the newest committed
//                                  checkpoint, and the CRC-32 of its name
//
// A checkpoint is valid only if its manifest's seal matches, the manifest parses, and every
// file it lists has exactly the recorded size and CRC-32. Files not listed are ignored. So
// every byte a resume reads is checked: the data files by the manifest, the manifest by its
// seal, and `latest` by its own CRC.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "brigade/base/file_io.h"

namespace brigade {

// 1: whole tensors written by one rank. 2: per-rank shard files described by "sharding"
// (ckpt/shard_index.h). 3: format 2 with a sealed manifest and optimizer state saved per
// tensor ("adamw.m/<tensor>"), what every layout writes (docs/checkpoints.md). Readers accept
// all three; formats 1 and 2 written before the seal existed are read unsealed.
inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr int kShardedCheckpointFormatVersion = 3;
inline constexpr int kLegacyShardedFormatVersion = 2;
inline constexpr char kManifestFileName[] = "manifest.json";
inline constexpr char kLatestFileName[] = "latest";
// manifest.json is read whole; one of a 10^9-parameter run with 1,000 ranks is a few MiB.
inline constexpr int64_t kMaxManifestBytes = int64_t{64} << 20;

// "step_00000100" (at least 8 digits).
std::string step_dir_name(int64_t step);

// The step of a committed checkpoint folder name ("step_00000100" -> 100); nullopt for anything
// else, including "step_00000100.tmp".
std::optional<int64_t> parse_step_dir_name(std::string_view name);

// The step of a temporary folder name: "step_<digits>[.<anything>].tmp" -> step, else nullopt.
// Covers the staging folder ("step_00000100.tmp") and folders set aside for deletion.
std::optional<int64_t> parse_step_tmp_name(std::string_view name);

// A name that can only mean a file directly inside the checkpoint folder: 1 to 255 bytes
// (NAME_MAX), no '/', not "." or "..", no NUL, not the manifest itself.
bool is_checkpoint_file_name(std::string_view name);

// Is `version` a format whose manifest has a "sharding" section?
inline bool is_sharded_format(int version) {
  return version == kShardedCheckpointFormatVersion || version == kLegacyShardedFormatVersion;
}

// The text of `latest` naming checkpoint folder `step`: the name, then its CRC-32.
std::string latest_file_text(int64_t step);
// The folder name in a `latest` file's text, or nullopt if the text is malformed, names no
// checkpoint folder or fails its CRC. A bare name (written before the CRC) is accepted.
std::optional<std::string> parse_latest_file_text(std::string_view text);

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

// The bytes of manifest.json: the manifest's JSON (indented, so a person can read it), whose
// last member is the seal "manifest_crc32": "0x1234abcd", the CRC-32 of every byte before the
// comma that opens the seal. Any flipped bit fails the check, and so does a torn write, which
// loses the end of the file and with it the seal.
std::string sealed_manifest_text(const Manifest& m);

// Parses the text of `path`, a manifest.json: checks the seal (every format-3 manifest has
// one; formats 1 and 2 may predate it, and then *unsealed is set and nothing but the structure
// is checked), that the text is not too large or too deeply nested, and the structure. Throws
// CheckpointError naming path and what is wrong.
Manifest parse_manifest_text(std::string_view text, const std::string& path,
                             bool* unsealed = nullptr);

}  // namespace brigade
