#pragma once
// Top-k sparsification with error feedback (Deep Gradient Compression's core, Lin et al. 2018)
// over one flat range of d values:
//   acc = scale * g + e;  keep the k = ceil(fraction * d) entries of largest |acc| (topk.h);
//   sent = those values as the wire carries them (f32, or bf16-rounded);
//   e = acc - sent at the kept entries, e = acc elsewhere
// so sent + e_new = scale * g + e_old exactly. Each replica sends k (u32 index, value) pairs;
// every replica scatters all W contributions in rank order and divides by W:
//   update = (1/W) sum_r sparse_r      (the same mean DDP would take of dense gradients).
// k is fixed by the config, so payloads have equal sizes and one all_gather suffices.
//
// Payload (little-endian): [0, 4) magic "BLTK", [4] version 1, [5] value format, [6, 8) zero,
// [8, 16) d (u64), [16, 24) k (u64), k u32 indices (strictly ascending, < d), k values.
// size = 24 + 4 k + value_bytes(format, k).
#include <cstdint>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/optim/optimizer.h"
#include "brigade/sync/lowcomm/payload.h"

namespace brigade {

struct TopkEfConfig {
  double fraction = 0.001;                 // share of entries sent, in (0, 1]
  ValueFormat values = ValueFormat::kF32;  // kF32 or kBF16
  // Throws ConfigError naming the key ("topk_ef.fraction"), the value and what is allowed.
  void validate() const;
};

class TopkEf {
 public:
  // State for the flat range [begin, end): e = 0, scratch of d indices.
  TopkEf(const TopkEfConfig& config, int64_t begin, int64_t end);

  // Collective. update[begin, end) (flat offset indexing) = mean over replicas of their sparse
  // contributions; e is updated. Throws PayloadError on a bad peer payload.
  void step(const float* grads, float scale, float* update, Communicator& comm);

  // Local halves. sent (optional, d values, zero where nothing was sent) receives this
  // replica's contribution as decoded by the others.
  void compress(const float* grads, float scale, uint8_t* payload, float* sent = nullptr);
  void decode_mean(const uint8_t* payloads, int world, float* update) const;
  void validate(const uint8_t* data, int64_t size) const;

  int64_t k() const { return k_; }
  int64_t payload_bytes() const;
  // (world - 1) * payload_bytes() each way.
  Traffic bytes_per_step(int world, int rank) const;

  std::vector<StateView> state_tensors();  // "topk_ef.error"

 private:
  TopkEfConfig config_;
  int64_t begin_, end_, k_;
  std::vector<float> error_, val_, scratch_;
  std::vector<uint32_t> idx_;
  std::vector<uint8_t> payload_, gathered_;
};

}  // namespace brigade
