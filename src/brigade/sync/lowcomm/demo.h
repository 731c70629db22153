#pragma once
// DeMo (Decoupled Momentum, Peng et al. 2024), the published precursor of Nous Research's
// DisTrO: replicas never all-reduce gradients. Each keeps a residual `delta` per tensor and,
// each step, shares only the few strongest DCT coefficients of it:
//   delta = beta * delta + lr * g                      (lr folded in, no (1 - beta))
//   per DCT chunk (dct.h): C = DCT(delta), keep the top-k |C| (topk.h)
//   delta -= IDCT(kept)                                (what was sent leaves the residual; the
//                                                       unquantized values, even for 1-bit)
//   all_gather the kept (index, value) pairs of every replica (payload.h, sparse format)
//   per coefficient: mean over the replicas that picked it (not sum / W)
//   u = IDCT(means);  p *= 1 - lr * wd  (decay tensors only);  p -= lr * sign(u)
// Every replica decodes the same payloads in rank order, so all end with identical weights.
//
// Bytes: each replica sends one payload of payload_bytes() (fixed by config and layout, so no
// count exchange is needed); an all_gather of W equal payloads moves (W - 1) * payload_bytes()
// each way per rank (bytes_per_step()).
#include <cstdint>
#include <memory>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/optim/optimizer.h"
#include "brigade/sync/lowcomm/dct.h"
#include "brigade/sync/lowcomm/dct_topk.h"
#include "brigade/sync/lowcomm/payload.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

struct DemoConfig {
  float beta = 0.999f;  // residual decay ("compression decay"), in [0, 1)
  int k = 32;           // coefficients sent per chunk, >= 1 (capped at the chunk size)
  int max_chunk = 64;   // chunk edge limit for DeMo's divisor rule, 1..64
  ValueFormat values = ValueFormat::kF32;  // f32, bf16, or 1-bit signs
  float weight_decay = 0.0f;               // decoupled, on ParamSpec::weight_decay tensors, >= 0
  // Throws ConfigError naming the key ("demo.beta"), the value and what is allowed.
  void validate() const;
};

class Demo {
 public:
  // State for the flat range [begin, end) of layout, which must consist of whole tensors
  // (ConfigError otherwise). delta starts at zero.
  Demo(const DemoConfig& config, const ParamLayout& layout, int64_t begin, int64_t end);

  // One step, collective over comm (every replica calls it with its own gradient). params and
  // grads are indexed by flat offset, as in Optimizer::step. Throws PayloadError if a peer's
  // payload is malformed or of another shape, CommError if the all_gather fails.
  void step(float* params, const float* grads, float lr, Communicator& comm);

  // The two local halves of step(), for tests and for callers with their own transport:
  // compress() updates delta from grads and writes this replica's payload (payload_bytes());
  // apply() decodes `world` consecutive payloads (validating each) and updates params.
  void compress(const float* grads, float lr, uint8_t* payload);
  void apply(const uint8_t* payloads, int world, float* params, float lr);

  int64_t payload_bytes() const { return codec_.size_bytes(); }
  const SparsePayloadFormat& payload_format() const { return codec_.format(); }
  // Bytes this rank sends and receives in one step(): (world - 1) * payload_bytes() each way.
  Traffic bytes_per_step(int world, int rank) const;

  // "demo.delta" over [begin, end): the residual, for checkpoints.
  std::vector<StateView> state_tensors();
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }

 private:
  DemoConfig config_;
  int64_t begin_, end_;
  DctTopkCodec codec_;        // the tensors, their DCTs and the payload format
  std::vector<float> delta_;  // (end - begin)
  // Scratch sized at construction for the largest chunk; gathered_ grows with the world once.
  std::vector<float> coeffs_, sum_, u_;
  std::vector<uint32_t> idx_, touched_;
  std::vector<float> val_;
  std::vector<uint32_t> count_;
  std::vector<uint8_t> payload_, gathered_;
};

}  // namespace brigade
