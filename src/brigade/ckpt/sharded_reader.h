#pragma once
// Reading a checkpoint under any layout (resharding on load).
//
// Any rank reads any region (region.h) of any global tensor: the reader intersects the region
// with the stored pieces (shard_index.h) and preads only the bytes that overlap, so a
// checkpoint saved by 4 ranks loads into 1, 2 or 3 with identical values, whatever mix of
// boxes and flat ranges either side uses. Format-1 checkpoints (whole tensors written by
// rank 0) read the same way: each of their tensors is one piece covering it.
//
// Verification is collective: before a checkpoint is used, every file it lists is checked
// against the manifest's size and CRC-32. With a communicator the files are divided among the
// ranks (each byte read once in total) and the verdict is agreed, so all ranks accept the same
// checkpoint or all reject it with the same message, which names the file. A rejected
// checkpoint makes open_latest_valid() fall back to the previous one, as CheckpointReader does.
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "brigade/ckpt/manifest.h"
#include "brigade/ckpt/region.h"
#include "brigade/ckpt/safetensors.h"
#include "brigade/ckpt/shard_index.h"
#include "brigade/comm/communicator.h"

namespace brigade {

class ShardedCheckpointReader {
 public:
  // Opens and verifies the checkpoint folder dir. Collective over comm when given (null: this
  // process verifies everything). Throws CheckpointError (on every rank) naming the offending
  // file; CommError if the exchange fails.
  static ShardedCheckpointReader open(const std::string& dir, Communicator* comm = nullptr);

  // The newest valid checkpoint under root: `latest`, else every step_* folder, newest first
  // (the order rank 0 sees). Each rejected one is reported (stderr on rank 0; every rank
  // appends the same line to *rejections). nullopt if there is none. Collective over comm.
  static std::optional<ShardedCheckpointReader> open_latest_valid(
      const std::string& root, Communicator* comm = nullptr,
      std::vector<std::string>* rejections = nullptr);

  ShardedCheckpointReader(ShardedCheckpointReader&&) noexcept;
  ShardedCheckpointReader& operator=(ShardedCheckpointReader&&) noexcept;
  ~ShardedCheckpointReader();

  int64_t step() const { return manifest_.step; }
  const std::string& dir() const { return dir_; }
  const nlohmann::json& state() const { return manifest_.state; }
  const Manifest& manifest() const { return manifest_; }
  const ShardIndex& index() const { return index_; }
  // How many ranks saved it (1 for format 1).
  int saved_world_size() const { return index_.world_size; }
  // What rank r passed as rank_state when saving (null if none or r is out of range).
  const nlohmann::json& rank_state(int r) const;

  bool contains(const std::string& tensor) const { return index_.tensors.count(tensor) != 0; }
  // Throws CheckpointError if absent.
  const ShardTensorEntry& tensor(const std::string& name) const;

  // Reads `region` of tensor `name` into out: region.numel() elements of the tensor's dtype,
  // row-major in the region (nbytes must equal that size). Thread-safe. Throws
  // CheckpointError if the tensor is missing, the region does not fit it, or a file does not
  // hold what the index says (naming the file).
  void read(const std::string& name, const Region& region, void* out, int64_t nbytes) const;
  // read() for F32 tensors, count = region.numel().
  void read_f32(const std::string& name, const Region& region, float* out, int64_t count) const;

  // Checkpoints of data-parallel runs before format 3 saved each optimizer state buffer as one
  // flat tensor ("adamw.m", shape (num_params,), tensors in layout order); every layout now
  // saves it per tensor ("adamw.m/<tensor>"). This makes such a flat tensor readable under the
  // per-tensor names: for each slot, "<flat>/<slot.name>" becomes elements [offset, offset +
  // numel) of "<flat>", in the slot's shape. Returns false (and adds nothing) unless the
  // checkpoint holds `flat` as a 1-D tensor of `total` elements and none of the names yet.
  struct FlatSlot {
    std::string name;
    std::vector<int64_t> shape;
    int64_t offset = 0;
  };
  bool add_flat_views(const std::string& flat, const std::vector<FlatSlot>& slots, int64_t total);

 private:
  struct Cache;
  ShardedCheckpointReader(std::string dir, Manifest manifest, ShardIndex index);
  const SafetensorsFile& file(const std::string& filename) const;

  std::string dir_;
  Manifest manifest_;
  ShardIndex index_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace brigade
