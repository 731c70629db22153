#pragma once
// Asynchronous sharded checkpoints: training waits only for a copy of this rank's pieces into
// host memory; the write and the commit (sharded_save.h) run on a background thread.
//
//   save(step, data, state)   waits for the save in flight, if any (at most one at a time),
//                             copies the pieces this rank writes into the snapshot buffer
//                             (allocated at the first save, reused after), hands the job to
//                             the thread and returns. The caller may change its buffers now.
//   poll()                    the result of a finished save, once, without blocking.
//   wait()                    blocks until no save is in flight, then as poll().
// A failed save (a full disk, a lost rank) comes back as a SaveResult with ok = false; the
// previous checkpoint stays `latest`; the next save() simply tries again.
//
// Coordination with training: the commit needs collectives (an all_gather of digests and a
// broadcast of the outcome). They run on the communicator given to the constructor, from the
// background thread, concurrently with training's collectives. That is safe only because this
// communicator is the saver's alone: create it for the purpose (create_subgroup over all world
// ranks with group_name "ckpt", or create_communicator with its own store prefix). It then has
// its own connections and its own FIFO, so its operations never interleave with the training
// communicator's, and a slow save never delays a gradient all-reduce. Every rank must call
// save() for the same steps in the same order (a checkpoint interval does that).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "brigade/ckpt/sharded_save.h"

namespace brigade {

class AsyncCheckpointSaver {
 public:
  // Collective over comm (builds the ShardPlan; see ShardedCheckpointSaver). comm must be used
  // by nothing else while the saver lives.
  AsyncCheckpointSaver(std::string root, Communicator& comm, std::vector<ShardPiece> pieces,
                       nlohmann::json mesh = nlohmann::json::object(),
                       CheckpointOptions options = {});
  // Waits for a save in flight (bounded by comm's timeout), then stops the thread.
  ~AsyncCheckpointSaver();
  AsyncCheckpointSaver(const AsyncCheckpointSaver&) = delete;
  AsyncCheckpointSaver& operator=(const AsyncCheckpointSaver&) = delete;

  // See above. data[i] holds pieces()[i]'s elements and is read only during this call.
  void save(int64_t step, std::span<const void* const> data, nlohmann::json state,
            nlohmann::json rank_state = nullptr);
  std::optional<SaveResult> poll();
  std::optional<SaveResult> wait();
  bool busy() const;

  const ShardPlan& plan() const { return saver_.plan(); }
  // How often the snapshot buffer was allocated (1 after any number of saves of one plan).
  int64_t snapshot_allocations() const { return snapshot_allocations_; }
  // Test seam: runs on the background thread before it writes a job, so a test can change
  // the caller's buffers while the job is provably not yet written. Set it before the first
  // save().
  void set_before_write_hook(std::function<void()> hook) { before_write_ = std::move(hook); }

 private:
  struct Job {
    int64_t step = 0;
    nlohmann::json state;
    nlohmann::json rank_state;
  };
  void run();

  ShardedCheckpointSaver saver_;
  std::unique_ptr<char[]> snapshot_;        // what this rank writes, back to back
  std::vector<const void*> snapshot_ptrs_;  // per written piece: where it is in snapshot_
  int64_t snapshot_allocations_ = 0;
  std::function<void()> before_write_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Job> job_;  // queued or being written
  std::deque<SaveResult> done_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after everything above is ready
};

}  // namespace brigade
