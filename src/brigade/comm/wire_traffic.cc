#include "brigade/comm/wire_traffic.h"

#include <algorithm>
#include <vector>

#include "brigade/base/check.h"

namespace brigade {

namespace {
int64_t round_up(int64_t value, int64_t multiple) {
  int64_t rem = value % multiple;
  return rem == 0 ? value : value + multiple - rem;
}
int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
// ceil(log2 n) for n >= 1.
int64_t ceil_log2(int world) {
  int64_t steps = 0;
  while ((int64_t{1} << steps) < world) ++steps;
  return steps;
}
}  // namespace

Traffic ring_allreduce_traffic(int64_t total_bytes, int64_t element_bytes, int world, int rank,
                               int64_t max_segment_bytes) {
  BRIGADE_CHECK(world >= 1 && rank >= 0 && rank < world) << "world " << world << " rank " << rank;
  BRIGADE_CHECK(element_bytes > 0 && total_bytes >= 0 && total_bytes % element_bytes == 0)
      << "total " << total_bytes << " element " << element_bytes;
  if (world == 1 || total_bytes == 0) return Traffic{};
  // Mirrors the segment arithmetic in gloo/allreduce.cc, ring().
  const int64_t max_seg = element_bytes * std::max<int64_t>(1, max_segment_bytes / element_bytes);
  const int64_t num_segments =
      round_up(std::max<int64_t>(ceil_div(total_bytes, max_seg), 2 * int64_t{world}), world);
  const int64_t per_rank = num_segments / world;
  const int64_t seg_bytes = round_up(ceil_div(total_bytes, num_segments), element_bytes);
  auto chunk_bytes = [&](int chunk) {
    int64_t sum = 0;
    for (int64_t s = chunk * per_rank; s < (chunk + 1) * per_rank; ++s) {
      sum += std::clamp<int64_t>(total_bytes - s * seg_bytes, 0, seg_bytes);
    }
    return sum;
  };
  const int64_t own = chunk_bytes(rank);
  const int64_t prev = chunk_bytes((rank + world - 1) % world);
  const int64_t next = chunk_bytes((rank + 1) % world);
  return Traffic{2 * total_bytes - own - prev, 2 * total_bytes - own - next,
                 ring_allreduce_rounds(total_bytes, element_bytes, world, max_segment_bytes)};
}

int64_t ring_allreduce_rounds(int64_t total_bytes, int64_t element_bytes, int world,
                              int64_t max_segment_bytes) {
  BRIGADE_CHECK(world >= 1 && element_bytes > 0 && total_bytes >= 0)
      << "world " << world << " total " << total_bytes << " element " << element_bytes;
  if (world == 1 || total_bytes == 0) return 0;
  const int64_t max_seg = element_bytes * std::max<int64_t>(1, max_segment_bytes / element_bytes);
  const int64_t num_segments =
      round_up(std::max<int64_t>(ceil_div(total_bytes, max_seg), 2 * int64_t{world}), world);
  const int64_t messages_per_phase = (world - 1) * (num_segments / world);
  return 2 * ceil_div(messages_per_phase, 2);
}

int64_t ring_allgather_rounds(int world) {
  return world > 1 ? world - 1 : 0;
}

int64_t pairwise_alltoall_rounds(int world) {
  return world > 1 ? 1 : 0;
}

int64_t binomial_broadcast_rounds(int world) {
  return ceil_log2(world);
}

int64_t barrier_rounds(int world) {
  return ceil_log2(world);
}

Traffic ring_allgatherv_traffic(std::span<const int64_t> bytes_per_rank, int rank) {
  const int world = static_cast<int>(bytes_per_rank.size());
  BRIGADE_CHECK(rank >= 0 && rank < world) << "rank " << rank << " world " << world;
  if (world == 1) return Traffic{};
  int64_t total = 0;
  for (int64_t b : bytes_per_rank) total += b;
  return Traffic{total - bytes_per_rank[(rank + 1) % world], total - bytes_per_rank[rank],
                 ring_allgather_rounds(world)};
}

Traffic pairwise_alltoallv_traffic(std::span<const int64_t> send_bytes,
                                   std::span<const int64_t> recv_bytes, int rank) {
  BRIGADE_CHECK(send_bytes.size() == recv_bytes.size() && rank >= 0 &&
                rank < static_cast<int>(send_bytes.size()))
      << "rank " << rank;
  Traffic t;
  for (size_t p = 0; p < send_bytes.size(); ++p) {
    if (static_cast<int>(p) == rank) continue;
    t.sent += send_bytes[p];
    t.received += recv_bytes[p];
  }
  t.rounds = pairwise_alltoall_rounds(static_cast<int>(send_bytes.size()));
  return t;
}

Traffic binomial_broadcast_traffic(int64_t bytes, int world, int rank, int root) {
  BRIGADE_CHECK(world >= 1 && rank >= 0 && rank < world && root >= 0 && root < world)
      << "world " << world << " rank " << rank << " root " << root;
  // Mirrors gloo/broadcast.cc: at step i the virtual ranks whose bits above i are all zero
  // take part; the one with bit i clear sends to the one with bit i set.
  const uint64_t vsize = static_cast<uint64_t>(world);
  const uint64_t vrank = (static_cast<uint64_t>(rank) + vsize - root) % vsize;
  int dim = 0;
  while ((uint64_t{1} << dim) < vsize) ++dim;
  uint64_t mask = (uint64_t{1} << dim) - 1;
  Traffic t;
  for (int i = 0; i < dim; ++i) {
    mask ^= uint64_t{1} << i;
    if ((vrank & mask) != 0) continue;
    const uint64_t vpeer = vrank ^ (uint64_t{1} << i);
    if (vpeer >= vsize) continue;
    if ((vrank & (uint64_t{1} << i)) == 0) {
      t.sent += bytes;
    } else {
      t.received += bytes;
    }
  }
  t.rounds = binomial_broadcast_rounds(world);
  return t;
}

Traffic bf16_allreduce_traffic(int64_t n, int world, int rank) {
  BRIGADE_CHECK(n >= 0 && world >= 1 && rank >= 0 && rank < world)
      << "n " << n << " world " << world << " rank " << rank;
  if (n == 0 || world == 1) return Traffic{};
  std::vector<int64_t> bytes(world, 2 * (n / world));
  for (int p = 0; p < n % world; ++p) bytes[p] += 2;
  const std::vector<int64_t> recv(world, bytes[rank]);
  const Traffic a = pairwise_alltoallv_traffic(bytes, recv, rank);
  const Traffic g = ring_allgatherv_traffic(bytes, rank);
  return Traffic{a.sent + g.sent, a.received + g.received, a.rounds + g.rounds};
}

}  // namespace brigade
