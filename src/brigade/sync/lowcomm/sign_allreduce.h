#pragma once
// Error-fed 1-bit all-reduce of a flat range: the compressed all-reduce of 1-bit Adam (Tang et
// al. 2021, DeepSpeed's compressed_allreduce), used for DiLoCo's pseudo-gradient
// (sync.payload = "1bit"). No f32 vector crosses the wire; two error-feedback stages keep what
// the signs leave out for the next call, so nothing is lost, only delayed:
//   worker i:   e_i += x_i;  c_i = Q(e_i);  e_i -= c_i
//   all_to_all: shard j of every c_i goes to rank j
//   owner j:    s_j += (1/W) sum_i c_i[j];  q_j = Q(s_j);  s_j -= q_j
//   all_gather: every rank decodes x = [q_0 .. q_{W-1}], bitwise the same on all of them
// Q(v), per block: mean(|v|) * sign(v) (the scale that minimises the L2 error for the signs;
// sign(0) = +1). Blocks cut every tensor of the range into runs of <= block values, so a scale
// never spans two tensors. Shards are W contiguous runs of whole blocks, balanced by values.
//
// Message of shard j (little-endian), padded with zeros to M = the largest shard's message:
//   f32 scale per block of the shard, then ceil(values / 8) bytes of signs (LSB first,
//   1 = negative).
// Wire per call and rank: (W - 1) M sent and received in the all_to_all, the same in the
// all_gather: about 2 (W - 1) / W * n / 8 bytes each way, 32x less than Gloo's f32 ring.
//
// One-level form, for exchanges that are not collectives (DiLoCo's quorum through the store):
// encode() writes this replica's Q(e_i + x) as one shard covering the range, decode_add() adds
// a validated one; there is no owner stage then.
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/optim/optimizer.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

class SignAllReduce {
 public:
  // [begin, end) of layout (cut at its tensor edges), blocks of <= block values (>= 8).
  SignAllReduce(const ParamLayout& layout, int64_t begin, int64_t end, int64_t block);

  // Collective. x holds this replica's end - begin values (x[0] is flat offset begin) and
  // becomes the compressed mean over the replicas. Throws PayloadError naming the rank of a bad
  // message; the residuals already hold this call's values then (the run stops on it).
  void all_reduce_mean(float* x, Communicator& comm);

  // One-level form: e += x; out (one_shard_bytes()) = Q(e); e -= Q(e). sent, if given
  // (end - begin values), receives the decoded Q(e).
  void encode(const float* x, uint8_t* out, float* sent = nullptr);
  // Throws PayloadError (naming `from`) unless data is a valid one-shard message.
  void validate(const uint8_t* data, int64_t size, int from) const;
  // sum += weight * decoded values of a validated one-shard message.
  void decode_add(const uint8_t* data, float weight, float* sum) const;
  int64_t one_shard_bytes() const;
  // e += decoded values of this replica's own encode() output that reached nobody.
  void return_unsent(const uint8_t* data) { decode_add(data, 1.0f, residual_.data()); }

  // M for `world` ranks, and the bytes of one all_reduce_mean() for rank.
  int64_t message_bytes(int world) const;
  Traffic bytes_per_call(int world, int rank) const;

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  // "<prefix>.residual": e_i; "<prefix>.owner_residual": s (nonzero on this rank's shard only).
  std::vector<StateView> state_tensors(const std::string& prefix);
  const float* residual() const { return residual_.data(); }

 private:
  struct Block {
    int64_t begin, end;  // relative to the range
  };
  struct Shard {
    int64_t first_block, last_block;  // [first, last)
    int64_t begin, end;               // values, relative to the range
    int64_t bytes;                    // unpadded message
  };
  std::vector<Shard> shards_for(int world) const;
  // The partition for `world`, kept from the last call (an outer step allocates nothing).
  const std::vector<Shard>& shards(int world);
  // Quantizes v over the shard into msg (padded_bytes, zeroed first) and subtracts what it sent.
  void quantize(const Shard& s, float* v, uint8_t* msg, int64_t padded_bytes,
                float* sent = nullptr) const;
  void check(const Shard& s, const uint8_t* msg, int64_t padded_bytes, int from) const;
  void add_decoded(const Shard& s, const uint8_t* msg, float weight, float* sum) const;

  int64_t begin_, end_;
  std::vector<Block> blocks_;
  std::vector<float> residual_, owner_residual_, mean_;
  Shard whole_{};  // the one-shard partition of the one-level form
  int cached_world_ = 0;
  std::vector<Shard> shards_;
  int64_t cached_message_bytes_ = 0;  // M of shards_
  std::vector<uint8_t> send_, recv_;
};

}  // namespace brigade
