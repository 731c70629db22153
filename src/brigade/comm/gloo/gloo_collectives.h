#pragma once
// Bodies of the Gloo collectives, run on the communicator's worker thread (internal). Each
// performs the operation for this rank and returns the payload bytes it moved (derived from
// the algorithm, wire_traffic.h). Arguments are already validated by GlooCommunicator.
#include <cstdint>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/gloo/gloo_shared.h"
#include "brigade/comm/wire_traffic.h"

namespace brigade::detail {

Traffic gloo_all_reduce_f32(GlooShared& s, float* data, int64_t n, ReduceOp op);
Traffic gloo_all_reduce_bf16(GlooShared& s, float* data, int64_t n, ReduceOp op);
Traffic gloo_reduce_scatter(GlooShared& s, const float* in, float* out, int64_t n_per_rank,
                            ReduceOp op);
// Even or uneven all_gather of elements of element_bytes bytes; counts has one entry per rank.
Traffic gloo_all_gather_v(GlooShared& s, const void* in, void* out,
                          const std::vector<int64_t>& counts, int64_t element_bytes);
Traffic gloo_broadcast(GlooShared& s, void* data, int64_t bytes, int root);
// bytes_per_rank bytes from every rank to every rank (float all_to_all passes 4 n).
Traffic gloo_all_to_all(GlooShared& s, const void* in, void* out, int64_t bytes_per_rank);
Traffic gloo_all_to_all_v(GlooShared& s, const float* in, const std::vector<int64_t>& send_counts,
                          float* out, const std::vector<int64_t>& recv_counts);
Traffic gloo_barrier(GlooShared& s);

}  // namespace brigade::detail
