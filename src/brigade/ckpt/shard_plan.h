#pragma once
// ShardPlan: who writes which piece of a sharded checkpoint, settled once for a layout.
//
// Each rank declares the pieces of global tensors it holds in memory (a TP rank: a column box
// of each split weight plus the replicated LayerNorm vectors; a ZeRO rank: the flat range of
// every optimizer state tensor it owns plus, under ZeRO-1/2, every full parameter). build()
// gathers every rank's declarations and decides, the same way on every rank:
//   - a piece declared identically (same tensor, same region) by several ranks is replicated.
//     A small one (under split_bytes) is written by the lowest of them; a large one is cut
//     along its first dimension into one block per holder, so that under DDP (every rank
//     holding everything) the ranks share the writing instead of rank 0 writing it all;
//   - the same tensor name must have the same shape and dtype everywhere;
//   - the written pieces of each tensor must tile it exactly (no overlap, nothing missing).
// The outcome is the checkpoint's shard index without the per-save parts (file digests,
// rank_state), so a save only has to exchange digests.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/ckpt/region.h"
#include "brigade/ckpt/safetensors.h"
#include "brigade/ckpt/shard_index.h"
#include "brigade/comm/communicator.h"

namespace brigade {

// A piece of a global tensor held by this rank; its data (given at each save) is `region`'s
// elements in row-major order of the region (a flat range: simply contiguous).
struct ShardPiece {
  std::string tensor;          // global name, e.g. "h.0.attn.c_attn.weight" or "adam.m"
  std::vector<int64_t> shape;  // the global tensor's shape
  StDtype dtype = StDtype::kF32;
  Region region;
};

class ShardPlan {
 public:
  // Replicated pieces of at least this many bytes are split among their holders (the default
  // of CheckpointOptions::split_replicated_bytes).
  static constexpr int64_t kSplitBytes = int64_t{1} << 20;

  // What this rank writes of pieces()[piece]: `region` (the whole piece's region, or a block
  // of its first dimension), whose elements are the nbytes at byte `offset` of the piece's
  // data (a block of the first dimension is contiguous in row-major storage), stored under
  // `key` in file_name().
  struct Written {
    size_t piece = 0;
    std::string key;
    Region region;
    int64_t offset = 0;
    int64_t nbytes = 0;
  };

  // Collective over comm (two small all_gathers). `mesh` is stored in the manifest as is.
  // Throws ConfigError, identically on every rank, if the declarations are inconsistent or do
  // not tile a tensor (naming the tensor and ranks); CommError if the exchange fails.
  static ShardPlan build(Communicator& comm, std::vector<ShardPiece> mine,
                         nlohmann::json mesh = nlohmann::json::object(),
                         int64_t split_bytes = kSplitBytes);
  // The same decision from every rank's declarations (all[r] = rank r's), without
  // communication: for one process, and for tests.
  static ShardPlan from_all(int rank, const std::vector<std::vector<ShardPiece>>& all,
                            nlohmann::json mesh = nlohmann::json::object(),
                            int64_t split_bytes = kSplitBytes);

  int rank() const { return rank_; }
  int world_size() const { return index_.world_size; }
  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  const std::vector<Written>& written() const { return written_; }
  // This rank's shard file, or "" if every piece it holds is written by a lower rank.
  const std::string& file_name() const { return file_name_; }
  int64_t bytes_to_write() const { return bytes_to_write_; }
  // Every tensor and its written pieces (rank_state still empty).
  const ShardIndex& index() const { return index_; }

 private:
  int rank_ = 0;
  std::vector<ShardPiece> pieces_;
  std::vector<Written> written_;
  std::string file_name_;
  int64_t bytes_to_write_ = 0;
  ShardIndex index_;
};

// Pieces as JSON and back (how build() sends them). from_json validates and throws
// ConfigError naming `who`.
nlohmann::json shard_pieces_to_json(const std::vector<ShardPiece>& pieces);
std::vector<ShardPiece> shard_pieces_from_json(const nlohmann::json& j, const std::string& who);

}  // namespace brigade
