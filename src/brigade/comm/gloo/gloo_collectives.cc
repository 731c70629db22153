// Collectives over a Gloo context. Which Gloo algorithm each one runs (and so its traffic):
//   all_reduce f32   gloo::allreduce, ring (pinned explicitly; reduce-scatter + all-gather)
//   all_reduce bf16  gloo::alltoallv of bf16 blocks, f32 sum of the N rows in rank order,
//                    one rounding to bf16, gloo::allgatherv of the bf16 blocks. This is a
//                    reduce-scatter + all-gather with the same 2(N-1)/N volume as the ring, but
//                    every element is accumulated in f32 from the N bf16 inputs (no per-hop
//                    re-rounding), and every rank ends with bitwise-identical values.
//   reduce_scatter   gloo::alltoall (pairwise) + local f32 reduction in rank order: the same
//                    (N-1)/N volume as a ring reduce-scatter, deterministic summation order.
//   all_gather(_v)   gloo::allgather (equal blocks) / gloo::allgatherv (ring)
//   broadcast        gloo::broadcast (binomial tree)
//   all_to_all(_v)   gloo::alltoall / gloo::alltoallv (pairwise, direct)
//   barrier          gloo::barrier (dissemination)
#include "brigade/comm/gloo/gloo_collectives.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>

#include <algorithm>
#include <cstring>

#include "brigade/tensor/bf16.h"

namespace brigade::detail {

namespace {

void sum_f32(void* c, const void* a, const void* b, size_t n) {
  float* out = static_cast<float*>(c);
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

void max_f32(void* c, const void* a, const void* b, size_t n) {
  float* out = static_cast<float*>(c);
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = std::max(x[i], y[i]);
}

// acc (n) op= row (n), in f32.
void accumulate(float* acc, const float* row, int64_t n, ReduceOp op) {
  if (op == ReduceOp::kMax) {
    for (int64_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], row[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) acc[i] += row[i];
  }
}

void finish_avg(float* acc, int64_t n, ReduceOp op, int world) {
  if (op != ReduceOp::kAvg) return;
  const float w = static_cast<float>(world);
  for (int64_t i = 0; i < n; ++i) acc[i] /= w;
}

// Near-equal split of n elements into `world` blocks: the first n % world get one more.
std::vector<int64_t> split_blocks(int64_t n, int world) {
  std::vector<int64_t> counts(world, n / world);
  for (int p = 0; p < n % world; ++p) counts[p] += 1;
  return counts;
}

std::vector<int64_t> scaled(const std::vector<int64_t>& v, int64_t factor) {
  std::vector<int64_t> out(v);
  for (auto& x : out) x *= factor;
  return out;
}

template <typename T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

Traffic gloo_all_reduce_f32(GlooShared& s, float* data, int64_t n, ReduceOp op) {
  if (n == 0) return {};
  if (s.size > 1) {
    gloo::AllreduceOptions o(s.context);
    o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    o.setOutput<float>(data, static_cast<size_t>(n));
    o.setReduceFunction(op == ReduceOp::kMax ? &max_f32 : &sum_f32);
    o.setTimeout(s.timeout);
    gloo::allreduce(o);
  }
  finish_avg(data, n, op, s.size);
  return ring_allreduce_traffic(n * 4, 4, s.size, s.rank,
                                gloo::detail::AllreduceOptionsImpl::kMaxSegmentSize);
}

Traffic gloo_all_reduce_bf16(GlooShared& s, float* data, int64_t n, ReduceOp op) {
  if (n == 0) return {};
  const int world = s.size;
  grow(s.wire, n);
  float_to_bf16(s.wire.data(), data, n);
  if (world == 1) {
    bf16_to_float(data, s.wire.data(), n);  // same rounding as with peers
    return {};
  }
  // Reduce-scatter step: block p of every rank goes to rank p.
  const std::vector<int64_t> counts = split_blocks(n, world);
  const int64_t mine = counts[s.rank];
  const std::vector<int64_t> recv_counts(world, mine);
  grow(s.rows, world * mine);
  {
    gloo::AlltoallvOptions o(s.context);
    o.setInput<uint16_t>(s.wire.data(), counts);
    o.setOutput<uint16_t>(s.rows.data(), recv_counts);
    o.setTimeout(s.timeout);
    gloo::alltoallv(o);
  }
  // Accumulate the N bf16 rows in f32, in rank order, then round once.
  grow(s.f32_scratch, 2 * mine);
  float* acc = s.f32_scratch.data();
  float* row = acc + mine;
  bf16_to_float(acc, s.rows.data(), mine);
  for (int p = 1; p < world; ++p) {
    bf16_to_float(row, s.rows.data() + p * mine, mine);
    accumulate(acc, row, mine, op);
  }
  finish_avg(acc, mine, op, world);
  grow(s.mine, mine);
  float_to_bf16(s.mine.data(), acc, mine);
  // All-gather step: every rank's reduced block to everyone.
  {
    gloo::AllgathervOptions o(s.context);
    o.setInput<uint16_t>(s.mine.data(), static_cast<size_t>(mine));
    o.setOutput<uint16_t>(s.wire.data(), std::vector<size_t>(counts.begin(), counts.end()));
    o.setTimeout(s.timeout);
    gloo::allgatherv(o);
  }
  bf16_to_float(data, s.wire.data(), n);
  return bf16_allreduce_traffic(n, world, s.rank);
}

Traffic gloo_reduce_scatter(GlooShared& s, const float* in, float* out, int64_t n_per_rank,
                            ReduceOp op) {
  const int64_t n = n_per_rank;
  if (n == 0) return {};
  const int world = s.size;
  if (world == 1) {
    std::memmove(out, in, n * sizeof(float));
    return {};
  }
  grow(s.f32_scratch, world * n);
  float* rows = s.f32_scratch.data();
  {
    gloo::AlltoallOptions o(s.context);
    o.setInput<float>(const_cast<float*>(in), static_cast<size_t>(world * n));
    o.setOutput<float>(rows, static_cast<size_t>(world * n));
    o.setTimeout(s.timeout);
    gloo::alltoall(o);
  }
  std::memcpy(out, rows, n * sizeof(float));
  for (int p = 1; p < world; ++p) accumulate(out, rows + p * n, n, op);
  finish_avg(out, n, op, world);
  const std::vector<int64_t> bytes(world, n * 4);
  return pairwise_alltoallv_traffic(bytes, bytes, s.rank);
}

Traffic gloo_all_gather_v(GlooShared& s, const void* in, void* out,
                          const std::vector<int64_t>& counts, int64_t element_bytes) {
  const std::vector<int64_t> bytes = scaled(counts, element_bytes);
  int64_t total = 0;
  for (int64_t b : bytes) total += b;
  if (total == 0) return {};
  if (s.size == 1) {
    std::memmove(out, in, bytes[0]);
    return {};
  }
  uint8_t* src = static_cast<uint8_t*>(const_cast<void*>(in));
  uint8_t* dst = static_cast<uint8_t*>(out);
  const bool even =
      std::all_of(bytes.begin(), bytes.end(), [&](int64_t b) { return b == bytes[0]; });
  if (even) {
    gloo::AllgatherOptions o(s.context);
    o.setInput<uint8_t>(src, static_cast<size_t>(bytes[s.rank]));
    o.setOutput<uint8_t>(dst, static_cast<size_t>(total));
    o.setTimeout(s.timeout);
    gloo::allgather(o);
  } else {
    gloo::AllgathervOptions o(s.context);
    o.setInput<uint8_t>(src, static_cast<size_t>(bytes[s.rank]));
    o.setOutput<uint8_t>(dst, std::vector<size_t>(bytes.begin(), bytes.end()));
    o.setTimeout(s.timeout);
    gloo::allgatherv(o);
  }
  return ring_allgatherv_traffic(bytes, s.rank);
}

Traffic gloo_broadcast(GlooShared& s, void* data, int64_t bytes, int root) {
  if (bytes == 0 || s.size == 1) return {};
  gloo::BroadcastOptions o(s.context);
  o.setOutput<uint8_t>(static_cast<uint8_t*>(data), static_cast<size_t>(bytes));
  o.setRoot(root);
  o.setTimeout(s.timeout);
  gloo::broadcast(o);
  return binomial_broadcast_traffic(bytes, s.size, s.rank, root);
}

Traffic gloo_all_to_all(GlooShared& s, const void* in, void* out, int64_t bytes_per_rank) {
  if (bytes_per_rank == 0) return {};
  if (s.size == 1) {
    std::memcpy(out, in, bytes_per_rank);
    return {};
  }
  const size_t total = static_cast<size_t>(s.size * bytes_per_rank);
  gloo::AlltoallOptions o(s.context);
  o.setInput<uint8_t>(static_cast<uint8_t*>(const_cast<void*>(in)), total);
  o.setOutput<uint8_t>(static_cast<uint8_t*>(out), total);
  o.setTimeout(s.timeout);
  gloo::alltoall(o);
  const std::vector<int64_t> bytes(s.size, bytes_per_rank);
  return pairwise_alltoallv_traffic(bytes, bytes, s.rank);
}

Traffic gloo_all_to_all_v(GlooShared& s, const float* in, const std::vector<int64_t>& send_counts,
                          float* out, const std::vector<int64_t>& recv_counts) {
  if (s.size == 1) {
    if (send_counts[0] > 0) std::memcpy(out, in, send_counts[0] * sizeof(float));
    return {};
  }
  // Runs even when this rank's counts are all zero: the peers still expect its (empty)
  // messages, and only the caller knows whether every rank's counts are zero.
  gloo::AlltoallvOptions o(s.context);
  o.setInput<float>(const_cast<float*>(in), send_counts);
  o.setOutput<float>(out, recv_counts);
  o.setTimeout(s.timeout);
  gloo::alltoallv(o);
  return pairwise_alltoallv_traffic(scaled(send_counts, 4), scaled(recv_counts, 4), s.rank);
}

Traffic gloo_barrier(GlooShared& s) {
  if (s.size == 1) return {};
  gloo::BarrierOptions o(s.context);
  o.setTimeout(s.timeout);
  gloo::barrier(o);
  return barrier_traffic(s.size);
}

}  // namespace brigade::detail
