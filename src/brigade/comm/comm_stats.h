#pragma once
// Bytes on the wire, per operation kind, for one communicator and this rank.
//
// Every count is payload bytes (the user data, or its bf16 image) that this rank sent to or
// received from peers. Transport framing (Gloo's 48-byte message preamble and its rendezvous
// notifications, TCP/IP headers) is not included. The Gloo backend cannot read per-operation
// byte counts from its transport, so it DERIVES them exactly from the algorithm Gloo runs for
// each call (see wire_traffic.h for every formula); tests/comm/wire_bytes_mp_test.cc checks the
// derivation against the kernel's TCP byte counters. Only successful operations are counted.
//
// Each call also adds its ROUNDS: the sequential round trips on the operation's critical path,
// likewise derived from the algorithm (wire_traffic.h), not measured. rounds x RTT is the
// latency a slow link adds to the operation when nothing overlaps it (docs/slow-links.md).
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace brigade {

enum class OpKind : int {
  kAllReduce = 0,
  kReduceScatter,
  kAllGather,
  kAllGatherV,
  kAllGatherBytes,  // all_gather_bytes and all_gather_bytes_v
  kBroadcast,       // broadcast and broadcast_bytes
  kAllToAll,
  kAllToAllV,
  kSend,
  kRecv,
  kBarrier,
  kPush,  // parameter server: gradients to a server (sync/ps/)
  kPull,  // parameter server: parameters from a server
};
inline constexpr int kNumOpKinds = 13;

// "all_reduce", "reduce_scatter", ...: the name used in logs and error messages.
const char* op_kind_name(OpKind kind);

struct OpCounters {
  int64_t calls = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t rounds = 0;  // sequential round trips, derived (see above)

  OpCounters& operator+=(const OpCounters& o) {
    calls += o.calls;
    bytes_sent += o.bytes_sent;
    bytes_received += o.bytes_received;
    rounds += o.rounds;
    return *this;
  }
  // What happened between an earlier reading o and this one.
  OpCounters& operator-=(const OpCounters& o) {
    calls -= o.calls;
    bytes_sent -= o.bytes_sent;
    bytes_received -= o.bytes_received;
    rounds -= o.rounds;
    return *this;
  }
};

// Thread-safe counters: the communicator's worker thread adds, any thread reads.
class CommStats {
 public:
  CommStats() = default;
  CommStats(const CommStats&) = delete;
  CommStats& operator=(const CommStats&) = delete;

  // Adds one completed call of `kind` that moved the given payload bytes in `rounds`
  // sequential round trips (0 where the caller does not know them).
  void record(OpKind kind, int64_t bytes_sent, int64_t bytes_received, int64_t rounds = 0);

  OpCounters get(OpKind kind) const;
  // Sum over all kinds.
  OpCounters total() const;
  void reset();
  // One line per kind with calls > 0, e.g.
  // "all_reduce: 12 calls, 24 rounds, sent 4.0 MiB, received 4.0 MiB".
  std::string summary() const;

 private:
  struct Atomic {
    std::atomic<int64_t> calls{0};
    std::atomic<int64_t> sent{0};
    std::atomic<int64_t> received{0};
    std::atomic<int64_t> rounds{0};
  };
  std::array<Atomic, kNumOpKinds> counters_;
};

}  // namespace brigade
