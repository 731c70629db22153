#pragma once
// Tests read a trainer checkpoint's tensors whole, whatever wrote it: a sharded checkpoint
// (every rank's pieces of each tensor, train/checkpointing.h) or a format-1 one (rank 0's
// model.safetensors + optimizer.safetensors), through the same reader the trainer resumes with.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "brigade/ckpt/sharded_reader.h"

namespace brigade::testing {

// Which tensors: the model's parameters, or the rest of the training state (optimizer state,
// a sync method's state, per-replica state) — what format 1 kept in optimizer.safetensors.
enum class CkptPart { kModel, kState };

// State tensors are named after their owner ("adamw.m", "diloco.global", "replica1.params").
inline bool is_state_tensor(const std::string& name) {
  const std::string owner = name.substr(0, name.find('.'));
  for (const char* p : {"adamw", "sgd", "powersgd", "diloco", "demo", "signef", "topk_ef"}) {
    if (owner == p) return true;
  }
  return owner.rfind("replica", 0) == 0;
}

struct WholeTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  bool operator==(const WholeTensor&) const = default;
};

// Every F32 tensor of `part` in checkpoint folder dir (the tokenizer is neither), by name.
// Verifies the folder's checksums first; throws CheckpointError as the reader does.
inline std::map<std::string, WholeTensor> read_checkpoint(const std::string& dir, CkptPart part) {
  const auto reader = ShardedCheckpointReader::open(dir);
  std::map<std::string, WholeTensor> out;
  for (const auto& [name, entry] : reader.index().tensors) {
    if (entry.dtype != StDtype::kF32 || is_state_tensor(name) != (part == CkptPart::kState)) {
      continue;
    }
    WholeTensor t{entry.shape, std::vector<float>(static_cast<size_t>(entry.numel()))};
    reader.read_f32(name, Region::whole(entry.shape), t.data.data(), entry.numel());
    out.emplace(name, std::move(t));
  }
  return out;
}

// The tensors of `all` named "<buffer>/<tensor>", by tensor name: one state buffer
// ("replica1.params", "adamw.m"), which checkpoints save per tensor.
inline std::map<std::string, WholeTensor> state_buffer(
    const std::map<std::string, WholeTensor>& all, const std::string& buffer) {
  std::map<std::string, WholeTensor> out;
  const std::string prefix = buffer + "/";
  for (const auto& [name, t] : all) {
    if (name.rfind(prefix, 0) == 0) out.emplace(name.substr(prefix.size()), t);
  }
  return out;
}

}  // namespace brigade::testing
