#pragma once
// ShardIndex: the "sharding" section of a format-2 manifest, which says where every piece of
// every global tensor lives:
//
//   "sharding": {
//     "world_size": 4,
//     "mesh": {"pp": 1, "dp": 2, "ep": 1, "tp": 2},          (the saver's description; any object)
//     "tensors": {
//       "h.0.mlp.c_fc.weight": {"dtype": "F32", "shape": [3072, 768], "pieces": [
//          {"rank": 0, "file": "rank_00000.safetensors", "key": "h.0.mlp.c_fc.weight",
//           "flat": false, "start": [0, 0], "count": [3072, 384]}, ...]},
//       "adam.m": {"dtype": "F32", "shape": [124439808], "pieces": [
//          {"rank": 1, ..., "flat": true, "start": [31109952], "count": [31109952]}, ...]}},
//     "rank_state": [{...}, null, ...]                       (per rank: RNG state etc.)
//   }
//
// A piece's elements are stored under `key` in `file` as a tensor of shape `count` (region.h).
// from_json trusts nothing: every file must be listed in the manifest, every region must fit,
// and the pieces of a tensor must tile it exactly (disjoint, every element covered once).
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "brigade/base/file_io.h"
#include "brigade/ckpt/region.h"
#include "brigade/ckpt/safetensors.h"

namespace brigade {

struct ShardPieceEntry {
  int rank = 0;      // the rank that wrote it
  std::string file;  // checkpoint file holding it
  std::string key;   // tensor name inside that safetensors file
  Region region;     // which elements of the global tensor
  // Never in a manifest: set by ShardedCheckpointReader::add_flat_views for a piece that is a
  // stretch of a stored 1-D tensor, starting at this element of it (region.numel() elements),
  // rather than the whole stored tensor.
  int64_t view_offset = -1;  // -1: the piece is the whole stored tensor
};

struct ShardTensorEntry {
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;
  std::vector<ShardPieceEntry> pieces;
  int64_t numel() const;
};

struct ShardIndex {
  int world_size = 1;
  nlohmann::json mesh = nlohmann::json::object();
  std::map<std::string, ShardTensorEntry> tensors;
  std::vector<nlohmann::json> rank_state;  // world_size entries once saved

  nlohmann::json to_json() const;
  // Parses and validates (see above). `files` are the manifest's files. Throws CheckpointError
  // naming `path` and the offending tensor.
  static ShardIndex from_json(const nlohmann::json& j, const std::string& path,
                              const std::map<std::string, FileDigest>& files);
};

// Why the pieces of `t` do not tile it exactly (naming the first overlap or the first element
// not covered), or nullopt. Regions must already fit the shape.
std::optional<std::string> shard_coverage_error(const ShardTensorEntry& t);

// "rank_00003.safetensors": the shard file of a rank.
std::string shard_file_name(int rank);

}  // namespace brigade
