#pragma once
// Exact payload bytes one rank sends and receives in each algorithm the Gloo backend runs.
// These are DERIVED from the algorithms (Gloo 0.0~git20220518 sources: gloo/allreduce.cc ring,
// gloo/allgather.cc, gloo/allgatherv.cc, gloo/alltoall(v).cc, gloo/broadcast.cc, and
// gloo/barrier.cc), not measured; framing bytes are excluded (see comm_stats.h).
// Notation: N = group size, T = total payload bytes, r = this rank.
//
// Rounds. Besides bytes, each collective has a latency cost: the number of ROUNDS on its
// critical path, also DERIVED from the algorithm (not measured). Gloo's tcp transport writes a
// message only after the receiver has announced the matching recv (a NOTIFY_RECV_READY
// message; see gloo/transport/tcp/pair.cc), so a message whose send and recv are posted at
// the same time takes one round trip before its data lands: one round = one RTT. An operation
// therefore costs at least rounds x RTT on top of its transfer time; that is the figure the
// slow-link model multiplies by the link's RTT (docs/slow-links.md). Where an algorithm keeps
// k messages in flight, k messages share a round. Each *_traffic function below also fills
// Traffic::rounds from its *_rounds function; tests/comm/wire_rounds_test.cc checks the closed
// forms against a step-by-step timing model of Gloo's loops.
#include <cstdint>
#include <span>

namespace brigade {

struct Traffic {
  int64_t sent = 0;
  int64_t received = 0;
  int64_t rounds = 0;  // sequential round trips on the critical path (see above); 0 if unknown
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

// Rounds of the same ring: each phase (reduce-scatter, then all-gather) runs
// (N-1)S messages per rank, S = numSegments / N segments per chunk (S = 2 up to 2N x 1 MiB
// of payload), keeping two in flight (it waits for message i-2 before posting i), so
// ceil((N-1)S / 2) rounds per phase and
//   rounds = 2 ceil((N-1)S / 2)  (= 2(N-1) when S = 2).
// Rounding each phase up, this may exceed the step-by-step timing by half a round when
// (N-1)S is odd. Segments past the end of the payload are empty and not sent; for payloads of
// a few elements per segment this is then an upper bound.
int64_t ring_allreduce_rounds(int64_t total_bytes, int64_t element_bytes, int world,
                              int64_t max_segment_bytes);

// gloo::allgather / gloo::allgatherv (ring): block b has bytes_per_rank[b]; r sends every block
// but r+1's and receives every block but its own. Equal blocks of B: (N-1)B each way.
Traffic ring_allgatherv_traffic(std::span<const int64_t> bytes_per_rank, int rank);
// Rounds: N-1. gloo::allgatherv passes one block per step and waits for it before the next;
// gloo::allgather passes half-blocks, two in flight, 2(N-1) of them: also N-1 rounds.
int64_t ring_allgather_rounds(int world);

// gloo::alltoall / gloo::alltoallv (pairwise, direct): r sends send_bytes[p] to every p != r and
// receives recv_bytes[p] from every p != r. Equal blocks of B: (N-1)B each way.
Traffic pairwise_alltoallv_traffic(std::span<const int64_t> send_bytes,
                                   std::span<const int64_t> recv_bytes, int rank);
// Rounds: 1 (N > 1). Every send and recv is posted before any is waited for.
int64_t pairwise_alltoall_rounds(int world);

// brigade's bf16 all-reduce (gloo_collectives.cc): n values cut into `world` blocks (the first
// n % world one longer); an alltoallv sends block p (2 bytes per value) to rank p, which sums
// them in f32, and a ring allgatherv returns the rounded blocks. Rounds: 1 + (N - 1).
Traffic bf16_allreduce_traffic(int64_t n, int world, int rank);

// gloo::broadcast (binomial tree over virtual ranks v = (r - root) mod N): each non-root rank
// receives T once; rank v sends T to v + 2^i for every step i after the one it received in
// (for the root: every step) while v + 2^i < N. Over all ranks: (N-1)T sent and received; the
// root sends ceil(log2 N) * T.
Traffic binomial_broadcast_traffic(int64_t bytes, int world, int rank, int root);
// Rounds: ceil(log2 N), the depth of the tree (a rank forwards only what it has received).
// Receivers post their recv at the start, so hops after the first may cost only a one-way
// delay: an upper bound.
int64_t binomial_broadcast_rounds(int world);

// gloo::barrier (dissemination): ceil(log2 N) zero-byte messages each way; payload 0.
// Rounds: ceil(log2 N) steps, each a send and a recv posted together and both waited for.
int64_t barrier_rounds(int world);
inline Traffic barrier_traffic(int world = 1) {
  return Traffic{0, 0, barrier_rounds(world)};
}

// Send / recv: the message bytes, one way; one round.
inline Traffic send_traffic(int64_t bytes) {
  return Traffic{bytes, 0, 1};
}
inline Traffic recv_traffic(int64_t bytes) {
  return Traffic{0, bytes, 1};
}

}  // namespace brigade
