#pragma once
// Helpers for the multi-process low-communication tests: a communicator per rank over a
// FileStore, the bytes one call adds to the counters, and a bitwise cross-rank comparison.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "brigade/comm/communicator.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade::testutil {

// Runs fn(rank, comm) in `world` processes, each with a communicator over one FileStore, and
// expects every rank to finish cleanly within `timeout`.
template <typename Fn>
void expect_ranks_pass(int world, std::chrono::milliseconds timeout, Fn&& fn) {
  TempDir dir;
  auto result = run_ranks(world, timeout, [&](int rank) {
    auto comm = make_file_comm(dir.path(), rank, world);
    fn(rank, *comm);
  });
  EXPECT_TRUE(AllRanksOk(result));
}

// Bytes (all operation kinds) that fn() added to this rank's counters.
template <typename Fn>
Traffic traffic_of(Communicator& comm, Fn&& fn) {
  const OpCounters before = comm.stats().total();
  fn();
  const OpCounters after = comm.stats().total();
  return Traffic{after.bytes_sent - before.bytes_sent,
                 after.bytes_received - before.bytes_received};
}

// True on every rank iff all ranks hold bitwise-equal data (one small all_gather; its bytes
// are counted, so call it outside traffic_of()).
inline bool identical_across_ranks(Communicator& comm, const float* data, int64_t n) {
  const uint64_t mine = fnv_hash(data, sizeof(float) * n);
  std::vector<uint64_t> all(comm.size());
  comm.all_gather_bytes(reinterpret_cast<const uint8_t*>(&mine),
                        reinterpret_cast<uint8_t*>(all.data()), 8);
  for (uint64_t h : all) {
    if (h != all[0]) return false;
  }
  return true;
}

// Sum over ranks of one int64 (to check group totals of the byte counters).
inline int64_t sum_across_ranks(Communicator& comm, int64_t v) {
  std::vector<int64_t> all(comm.size());
  comm.all_gather_bytes(reinterpret_cast<const uint8_t*>(&v),
                        reinterpret_cast<uint8_t*>(all.data()), 8);
  int64_t s = 0;
  for (int64_t x : all) s += x;
  return s;
}

}  // namespace brigade::testutil
