#pragma once
// Gradient reduce-scatter for ZeRO-2 and ZeRO-3: each rank ends a step holding only the
// averaged gradient of its own shard (parallel/zero_shard.h).
//
// The gradient buffer is cut into page-aligned buckets. During every backward (every micro-step:
// sharded gradients cannot be accumulated locally without keeping the full buffer), the
// grad-ready hook counts finished elements per bucket, and a finished bucket is reduce-scattered
// at once, asynchronously, while backward goes on with earlier layers. A bucket may span several
// shards, so the reduce-scatter is an all_to_all_v: rank p receives from every rank the piece of
// the bucket that p owns (an uneven reduce-scatter with the traffic of one), then sums the rows
// in rank order, in f32, into its shard, which accumulates over micro-steps; finish() divides by
// the number of ranks once. When a bucket's exchange has completed, the pages of its elements this
// rank does not own are returned to the OS (they read as zero for the next micro-step), so the
// full gradient is never resident at once.
//
// Overlap and memory: buckets are launched as backward finishes them while at most
// max_in_flight_elems gradient elements are in flight (their pages stay resident until the
// exchange is retired), and a bucket with an own piece also needs one of kRowSlots receive
// buffers (world rows of the piece). When either is exhausted, launching waits for the oldest
// exchanges; that wait is reported with the exposed time. Completed exchanges are retired, and
// their non-owned gradient pages returned, whenever a bucket is launched and at the end. The
// launch order never depends on timing, so it is the same on every rank.
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/model/model.h"
#include "brigade/parallel/grad_buckets.h"
#include "brigade/parallel/zero_shard.h"

namespace brigade {

class ShardReducer {
 public:
  static constexpr int kRowSlots = 2;

  // Installs a grad-ready hook on model. model's buffers must already be padded to
  // shards.padded(); bucket_elems is rounded up to whole pages; max_in_flight_elems bounds the
  // gradient elements being exchanged at once (at least one bucket is always allowed).
  ShardReducer(Communicator& dp, Model& model, const ShardLayout& shards, int64_t bucket_elems,
               int64_t max_in_flight_elems);
  ~ShardReducer();
  ShardReducer(const ShardReducer&) = delete;
  ShardReducer& operator=(const ShardReducer&) = delete;

  // A new step: the own shard's gradient becomes zero and every other gradient page is released.
  void start_step();

  // Call before each backward (every micro-step): waits for the previous backward's buckets and
  // makes the next backward's finished buckets launch. Returns the seconds spent waiting, here
  // and for receive buffers during the previous backward.
  double arm();

  // After the last backward of a step: launches any bucket backward did not finish, waits for
  // all, and averages the own shard over ranks. Returns the seconds spent waiting here and for
  // receive buffers during the last backward.
  double finish();

  int64_t num_buckets() const { return static_cast<int64_t>(tracker_.buckets().size()); }

  // The grad-ready hook installed on the model; public so that a hook chaining more work after
  // it (ZeRO-3's parameter gatherer) can replace the installed one.
  void on_grad_ready(int64_t offset, int64_t count);

 private:
  struct InFlight {
    size_t bucket;
    int slot;  // receive buffer, -1 when the rank owns nothing of the bucket
    std::unique_ptr<Work> work;
  };
  void launch(size_t bucket);
  double complete_oldest();
  double drain();
  void zero_unowned(FlatRange range);

  Communicator& dp_;
  Model& model_;
  ShardLayout shards_;
  FlatRange own_;
  BucketTracker tracker_;
  std::vector<bool> launched_;
  std::vector<std::vector<int64_t>> send_counts_;  // per bucket: its piece for each rank
  std::vector<std::vector<int64_t>> recv_counts_;  // per bucket: own piece from each rank
  std::vector<std::vector<float>> rows_;           // kRowSlots receive buffers (world, piece)
  std::vector<int> free_slots_;
  float no_rows_ = 0;  // a valid receive pointer for buckets with nothing to receive
  std::deque<InFlight> in_flight_;
  bool armed_ = false;
  int64_t max_in_flight_elems_;
  int64_t in_flight_elems_ = 0;
  double waited_s_ = 0;  // waits in launch() since the last arm() or finish()
};

}  // namespace brigade
