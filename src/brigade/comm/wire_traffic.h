#pragma once
// Exact payload bytes one rank sends and receives in each algorithm the Gloo backend runs.
// These are DERIVED from the algorithms (Gloo 0.0~git20220518 sources: gloo/allreduce.cc ring,
// gloo/allgather.cc, gloo/allgatherv.cc, gloo/alltoall(v).cc, gloo/broadcast.cc, and
// gloo/barrier.cc), not measured; framing bytes are excluded (see comm_stats.h).
// Notation: N = group size, T = total payload bytes, r = this rank.
#include <cstdint>
#include <span>

namespace brigade {

struct Traffic {
  int64_t sent = 0;
  int64_t received = 0;
};

// gloo::allreduce, ring algorithm. The T bytes are cut into numSegments = roundUp(max(
// ceil(T / maxSeg), 2N), N) segments of segBytes = roundUp(ceil(T / numSegments), elem) bytes
// (the tail segments may be short or empty); chunk c is segments [c*S, (c+1)*S) with
// S = numSegments / N. Reduce-scatter: r sends every chunk but r and receives every chunk but
// r+1. All-gather: r sends every chunk but r-1 and receives every chunk but r. So
//   sent = 2T - len(chunk r) - len(chunk r-1),  received = 2T - len(chunk r) - len(chunk r+1),
// which is 2(N-1)/N * T on every rank when the chunks are equal, and sums to 2(N-1)T over
// ranks for any T.
Traffic ring_allreduce_traffic(int64_t total_bytes, int64_t element_bytes, int world, int rank,
                               int64_t max_segment_bytes);

// gloo::allgather / gloo::allgatherv (ring): block b has bytes_per_rank[b]; r sends every block
// but r+1's and receives every block but its own. Equal blocks of B: (N-1)B each way.
Traffic ring_allgatherv_traffic(std::span<const int64_t> bytes_per_rank, int rank);

// gloo::alltoall / gloo::alltoallv (pairwise, direct): r sends send_bytes[p] to every p != r and
// receives recv_bytes[p] from every p != r. Equal blocks of B: (N-1)B each way.
Traffic pairwise_alltoallv_traffic(std::span<const int64_t> send_bytes,
                                   std::span<const int64_t> recv_bytes, int rank);

// gloo::broadcast (binomial tree over virtual ranks v = (r - root) mod N): each non-root rank
// receives T once; rank v sends T to v + 2^i for every step i after the one it received in
// (for the root: every step) while v + 2^i < N. Over all ranks: (N-1)T sent and received; the
// root sends ceil(log2 N) * T.
Traffic binomial_broadcast_traffic(int64_t bytes, int world, int rank, int root);

// gloo::barrier (dissemination): ceil(log2 N) zero-byte messages each way; payload 0.
inline Traffic barrier_traffic() {
  return Traffic{};
}

// Send / recv: the message bytes, one way.
inline Traffic send_traffic(int64_t bytes) {
  return Traffic{bytes, 0};
}
inline Traffic recv_traffic(int64_t bytes) {
  return Traffic{0, bytes};
}

}  // namespace brigade
