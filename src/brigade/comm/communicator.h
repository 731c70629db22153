#pragma once
// Communicator: the one interface every backend (Gloo over TCP today, NCCL later) implements.
// A communicator is a group of `size()` processes; this process is `rank()` in it. Every
// collective must be called by all members in the same order with matching arguments; that is
// the caller's contract, as in MPI, and is not checked across ranks.
//
// Each operation has an asynchronous form `*_async` that returns a Work handle, and a blocking
// form that is `*_async(...)->wait()`. Operations of one communicator run one at a time in the
// order they were issued (a FIFO per communicator), so an async all_reduce of bucket k overlaps
// with the caller's computation but not with bucket k+1's all_reduce. Buffers passed to an
// async operation must stay valid and untouched until its wait() returns.
//
// Failures: a timeout or a lost peer raises CommError (base/error.h) from wait() (or from the
// blocking form), naming the operation, the group and the peer where known. After a failure
// the communicator is broken: every later operation fails at once with the first error.
//
// Bytes on the wire are counted per operation kind in stats() (see comm_stats.h).
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "brigade/comm/comm_stats.h"

namespace brigade {

enum class ReduceOp { kSum, kAvg, kMax };
const char* reduce_op_name(ReduceOp op);

// Element type on the wire for all_reduce. kBF16 halves the bytes: inputs are rounded to bf16,
// partial sums are accumulated in f32, and the result is rounded to bf16 once (all ranks get
// bitwise-identical results). See docs/communication.md for the algorithm.
enum class WireDtype { kF32, kBF16 };

// Handle to an operation in flight.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation finished; throws CommError if it failed. May be called again
  // (returns or throws the same way). Destroying an unwaited Work waits for it (errors are then
  // not thrown, but the communicator is broken and its next operation reports the failure).
  virtual void wait() = 0;
  // True once the operation finished, successfully or not. Never blocks.
  virtual bool is_completed() const = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Group name for logs and errors: "world", "dp", "tp", ...
  virtual const std::string& name() const = 0;
  // Backend name: "gloo", "nccl".
  virtual const std::string& backend() const = 0;
  // Every wait inside an operation gives up after this long without progress.
  virtual std::chrono::milliseconds timeout() const = 0;
  virtual CommStats& stats() = 0;
  const CommStats& stats() const { return const_cast<Communicator*>(this)->stats(); }

  // ---- Asynchronous forms (what a backend implements) ----

  // data (n floats) becomes the reduction over ranks of data, in place.
  virtual std::unique_ptr<Work> all_reduce_async(float* data, int64_t n, ReduceOp op,
                                                 WireDtype wire = WireDtype::kF32) = 0;
  // in is (size, n_per_rank); out (n_per_rank) on rank r becomes the reduction of block r.
  virtual std::unique_ptr<Work> reduce_scatter_async(const float* in, float* out,
                                                     int64_t n_per_rank, ReduceOp op) = 0;
  // in is (n_per_rank); out is (size, n_per_rank) with block r from rank r.
  virtual std::unique_ptr<Work> all_gather_async(const float* in, float* out,
                                                 int64_t n_per_rank) = 0;
  // Uneven all_gather: counts[r] floats from rank r (counts has size() entries, identical on all
  // ranks; in has counts[rank()]); out is the concatenation in rank order.
  virtual std::unique_ptr<Work> all_gather_v_async(const float* in, float* out,
                                                   std::span<const int64_t> counts) = 0;
  // all_gather of raw bytes (compressed payloads): bytes_per_rank from every rank.
  virtual std::unique_ptr<Work> all_gather_bytes_async(const uint8_t* in, uint8_t* out,
                                                       int64_t bytes_per_rank) = 0;
  // Uneven byte all_gather: counts[r] bytes from rank r.
  virtual std::unique_ptr<Work> all_gather_bytes_v_async(const uint8_t* in, uint8_t* out,
                                                         std::span<const int64_t> counts) = 0;
  // data (n floats) on every rank becomes root's data.
  virtual std::unique_ptr<Work> broadcast_async(float* data, int64_t n, int root) = 0;
  virtual std::unique_ptr<Work> broadcast_bytes_async(void* data, int64_t bytes, int root) = 0;
  // in is (size, n_per_rank): block p goes to rank p; out is (size, n_per_rank): block p came
  // from rank p. in and out must not overlap.
  virtual std::unique_ptr<Work> all_to_all_async(const float* in, float* out,
                                                 int64_t n_per_rank) = 0;
  // all_to_all of raw bytes (compressed shards): the same with bytes_per_rank bytes per block.
  virtual std::unique_ptr<Work> all_to_all_bytes_async(const uint8_t* in, uint8_t* out,
                                                       int64_t bytes_per_rank) = 0;
  // Uneven all_to_all: send_counts[p] floats to rank p (contiguous, in rank order) and
  // recv_counts[p] floats from rank p. send_counts[p] here must equal recv_counts[rank] on p.
  virtual std::unique_ptr<Work> all_to_all_v_async(const float* in,
                                                   std::span<const int64_t> send_counts, float* out,
                                                   std::span<const int64_t> recv_counts) = 0;
  // Point-to-point. A send completes only once the peer has posted the matching recv (same
  // tag), so two ranks exchanging data must post both sides before waiting on either:
  //   auto s = comm.send_async(a, n, next, tag); auto r = comm.recv_async(b, n, prev, tag);
  //   s->wait(); r->wait();
  // Messages between one pair with one tag are matched in order. A send/recv Work reports
  // is_completed() only once wait() has returned (the transport has no non-blocking test).
  virtual std::unique_ptr<Work> send_async(const void* data, int64_t bytes, int peer,
                                           uint32_t tag) = 0;
  virtual std::unique_ptr<Work> recv_async(void* data, int64_t bytes, int peer, uint32_t tag) = 0;
  virtual std::unique_ptr<Work> barrier_async() = 0;

  // ---- Blocking forms: same contracts, return when done ----

  void all_reduce(float* data, int64_t n, ReduceOp op, WireDtype wire = WireDtype::kF32) {
    all_reduce_async(data, n, op, wire)->wait();
  }
  void reduce_scatter(const float* in, float* out, int64_t n_per_rank, ReduceOp op) {
    reduce_scatter_async(in, out, n_per_rank, op)->wait();
  }
  void all_gather(const float* in, float* out, int64_t n_per_rank) {
    all_gather_async(in, out, n_per_rank)->wait();
  }
  void all_gather_v(const float* in, float* out, std::span<const int64_t> counts) {
    all_gather_v_async(in, out, counts)->wait();
  }
  void all_gather_bytes(const uint8_t* in, uint8_t* out, int64_t bytes_per_rank) {
    all_gather_bytes_async(in, out, bytes_per_rank)->wait();
  }
  void all_gather_bytes_v(const uint8_t* in, uint8_t* out, std::span<const int64_t> counts) {
    all_gather_bytes_v_async(in, out, counts)->wait();
  }
  void broadcast(float* data, int64_t n, int root) { broadcast_async(data, n, root)->wait(); }
  void broadcast_bytes(void* data, int64_t bytes, int root) {
    broadcast_bytes_async(data, bytes, root)->wait();
  }
  void all_to_all(const float* in, float* out, int64_t n_per_rank) {
    all_to_all_async(in, out, n_per_rank)->wait();
  }
  void all_to_all_bytes(const uint8_t* in, uint8_t* out, int64_t bytes_per_rank) {
    all_to_all_bytes_async(in, out, bytes_per_rank)->wait();
  }
  void all_to_all_v(const float* in, std::span<const int64_t> send_counts, float* out,
                    std::span<const int64_t> recv_counts) {
    all_to_all_v_async(in, send_counts, out, recv_counts)->wait();
  }
  void send(const void* data, int64_t bytes, int peer, uint32_t tag) {
    send_async(data, bytes, peer, tag)->wait();
  }
  void recv(void* data, int64_t bytes, int peer, uint32_t tag) {
    recv_async(data, bytes, peer, tag)->wait();
  }
  void barrier() { barrier_async()->wait(); }
};

}  // namespace brigade
