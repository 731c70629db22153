#pragma once
// Helpers shared by the comm tests: a communicator over a FileStore, and timing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "brigade/comm/comm_factory.h"
#include "brigade/comm/file_store.h"
#include "brigade/comm/tcp_store.h"
#include "brigade/comm/wire_traffic.h"

namespace brigade::testutil {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline std::unique_ptr<Communicator> make_file_comm(const std::string& dir, int rank, int size,
                                                    milliseconds timeout = milliseconds(5000),
                                                    const std::string& name = "world") {
  CommOptions o;
  o.rank = rank;
  o.size = size;
  o.group_name = name;
  o.timeout = timeout;
  o.store = std::make_shared<FileStore>(dir, timeout);
  return create_communicator(o);
}

inline int64_t ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

// FNV-1a over raw bytes: lets ranks compare whole buffers bitwise through one small gather.
inline uint64_t fnv_hash(const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Runs fn (one operation of `kind`) and returns the bytes it added to the counters, checking
// that exactly one call of that kind was recorded.
template <typename Fn>
Traffic measure(Communicator& comm, OpKind kind, Fn&& fn) {
  const OpCounters before = comm.stats().get(kind);
  fn();
  const OpCounters after = comm.stats().get(kind);
  EXPECT_EQ(after.calls, before.calls + 1) << op_kind_name(kind);
  return Traffic{after.bytes_sent - before.bytes_sent,
                 after.bytes_received - before.bytes_received};
}

// Per-rank byte counts can only be predicted in closed form for symmetric cases, but the sum
// over ranks always can (every byte sent is received once). The ledger keeps, for each op this
// rank ran, what it counted and the predicted group totals; check_totals() gathers all ranks'
// counts with one all_gather and compares the sums.
class TrafficLedger {
 public:
  void add(const std::string& what, Traffic got, int64_t total_sent, int64_t total_received) {
    names_.push_back(what);
    mine_.push_back(got.sent);
    mine_.push_back(got.received);
    expected_.push_back(total_sent);
    expected_.push_back(total_received);
  }

  void check_totals(Communicator& comm) {
    const int64_t n = static_cast<int64_t>(mine_.size());
    std::vector<int64_t> all(n * comm.size());
    comm.all_gather_bytes(reinterpret_cast<const uint8_t*>(mine_.data()),
                          reinterpret_cast<uint8_t*>(all.data()), n * 8);
    for (int64_t k = 0; k < n; ++k) {
      int64_t sum = 0;
      for (int r = 0; r < comm.size(); ++r) sum += all[r * n + k];
      EXPECT_EQ(sum, expected_[k]) << names_[k / 2] << (k % 2 ? " received" : " sent")
                                   << ", summed over " << comm.size() << " ranks";
    }
  }

 private:
  std::vector<std::string> names_;
  std::vector<int64_t> mine_, expected_;
};

// A TCP store server on an ephemeral loopback port, and a client of it, with a 2 s timeout.
inline TcpStoreOptions server_options(const std::string& token = "") {
  TcpStoreOptions o;
  o.port = 0;
  o.is_server = true;
  o.token = token;
  o.timeout = std::chrono::seconds(2);
  return o;
}

inline TcpStoreOptions client_options(int port, const std::string& token = "") {
  TcpStoreOptions o;
  o.port = port;
  o.token = token;
  o.timeout = std::chrono::seconds(2);
  return o;
}

}  // namespace brigade::testutil
