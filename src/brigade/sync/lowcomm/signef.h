#pragma once
// EF-signSGD (Karimireddy et al. 2019): scaled sign compression with error feedback.
// Per segment (each tensor's part of the range, so every tensor gets its own scale):
//   q = scale * g + e                 (scale is the learning rate in the paper: the update is
//                                      lr-scaled, so the caller applies p -= update)
//   Delta = (||q||_1 / d) sign(q)     (sign(0) = +1: one bit cannot say 0)
//   e = q - Delta
// Each replica sends one f32 scale per segment plus d sign bits; every replica decodes all W
// payloads and averages the Deltas in rank order: update = (1/W) sum_r Delta_r.
//
// Payload (little-endian): [0, 4) magic "BLSG", [4] version 1, [5, 8) zero, [8, 12) number
// of segments S (u32), [12, 20) d (u64), S f32 scales, ceil(d / 8) bytes of signs (LSB first,
// 1 = negative). size = 20 + 4 S + ceil(d / 8): ~32x smaller than f32.
#include <cstdint>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/optim/optimizer.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

class SignEf {
 public:
  // State for [begin, end) of layout (any range; cut into segments at tensor edges). e = 0.
  SignEf(const ParamLayout& layout, int64_t begin, int64_t end);

  // Collective. update[begin, end) (indexed by flat offset) = mean over replicas of their
  // compressed (scale * grads + e); e is updated. Throws PayloadError on a bad peer payload.
  void step(const float* grads, float scale, float* update, Communicator& comm);

  // Local halves: compress() updates e and writes this replica's payload (payload_bytes());
  // decode_mean() validates `world` consecutive payloads and writes their mean Delta.
  // sent (optional, end - begin values) receives this replica's own Delta.
  void compress(const float* grads, float scale, uint8_t* payload, float* sent = nullptr);
  void decode_mean(const uint8_t* payloads, int world, float* update) const;
  // Throws PayloadError unless data is a payload of exactly this replica's shape.
  void validate(const uint8_t* data, int64_t size) const;

  int64_t payload_bytes() const;
  // (world - 1) * payload_bytes() each way (one all_gather of equal payloads).
  Traffic bytes_per_step(int world, int rank) const;

  std::vector<StateView> state_tensors();  // "signef.error"
  int64_t num_segments() const { return static_cast<int64_t>(segments_.size()); }

 private:
  struct Segment {
    int64_t begin, end;  // flat
  };
  int64_t begin_, end_;
  std::vector<Segment> segments_;
  std::vector<float> error_;
  std::vector<uint8_t> payload_, gathered_;
};

}  // namespace brigade
