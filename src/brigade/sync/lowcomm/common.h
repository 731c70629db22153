#pragma once
// What every low-communication method in sync/lowcomm shares: finding the whole tensors of a
// flat range, viewing a tensor as a matrix, and the wire-byte formulas of the two collectives
// the methods use (so each method's bytes_per_step() is a formula the tests hold against the
// Communicator's CommStats).
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

// The tensors of layout that make up [begin, end), in order. The range must consist of whole
// tensors (methods that transform or factorise a tensor need all of it); otherwise throws
// ConfigError naming `what`, the range and the tensor it cuts.
std::vector<const ParamSpec*> whole_tensors_in_range(const ParamLayout& layout, int64_t begin,
                                                     int64_t end, const std::string& what);

// A tensor as a row-major matrix (rows, cols): 2-D as is, 1-D (n) as (1, n), 0-D as (1, 1),
// higher ranks as (shape[0], product of the rest).
struct MatrixShape {
  int64_t rows = 1;
  int64_t cols = 1;
};
MatrixShape as_matrix(const std::vector<int64_t>& shape);

// Segment size of Gloo's ring all-reduce (gloo::AllreduceOptions' kMaxSegmentSize); the
// byte tests check it against the Gloo header.
inline constexpr int64_t kRingAllReduceSegmentBytes = int64_t{1} << 20;

// Traffic of one rank in an all_gather(_bytes) of `bytes` from each of `world` ranks (ring):
// (world - 1) * bytes each way.
Traffic all_gather_equal_traffic(int64_t bytes, int world, int rank);

// The exchange of a compressor whose payloads all have the same size: compress this replica's
// gradient into payload, all_gather every replica's payload into gathered (grown as needed),
// and decode their mean into update. Shared by EF-signSGD and top-k with error feedback.
template <typename Compressor>
void exchange_equal_payloads(Compressor& c, const float* grads, float scale, float* update,
                             Communicator& comm, std::vector<uint8_t>& payload,
                             std::vector<uint8_t>& gathered) {
  const int world = comm.size();
  const int64_t bytes = c.payload_bytes();
  c.compress(grads, scale, payload.data());
  if (static_cast<int64_t>(gathered.size()) < world * bytes) gathered.resize(world * bytes);
  comm.all_gather_bytes(payload.data(), gathered.data(), bytes);
  c.decode_mean(gathered.data(), world, update);
}

// Traffic of one rank in an f32 all_reduce of n floats (Gloo ring; see wire_traffic.h).
Traffic all_reduce_f32_traffic(int64_t n, int world, int rank);
// The same on the given wire (bf16: 2 bytes per value).
Traffic all_reduce_traffic(int64_t n, WireDtype wire, int world, int rank);

inline Traffic operator+(Traffic a, Traffic b) {
  return Traffic{a.sent + b.sent, a.received + b.received, a.rounds + b.rounds};
}

}  // namespace brigade
