#include "brigade/ckpt/async_save.h"

#include <cstring>

#include "brigade/base/check.h"
#include "brigade/base/trace.h"

namespace brigade {

AsyncCheckpointSaver::AsyncCheckpointSaver(std::string root, Communicator& comm,
                                           std::vector<ShardPiece> pieces, nlohmann::json mesh,
                                           CheckpointOptions options)
    : saver_(std::move(root), comm, std::move(pieces), std::move(mesh), options),
      snapshot_ptrs_(saver_.plan().written().size(), nullptr),
      thread_([this] { run(); }) {}

AsyncCheckpointSaver::~AsyncCheckpointSaver() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !job_.has_value(); });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void AsyncCheckpointSaver::save(int64_t step, std::span<const void* const> data,
                                nlohmann::json state, nlohmann::json rank_state) {
  const ShardPlan& plan = saver_.plan();
  BRIGADE_CHECK(data.size() == plan.pieces().size())
      << data.size() << " data pointers for " << plan.pieces().size() << " pieces";
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !job_.has_value(); });  // at most one save in flight
  if (!snapshot_ && plan.bytes_to_write() > 0) {
    snapshot_ = std::make_unique_for_overwrite<char[]>(static_cast<size_t>(plan.bytes_to_write()));
    ++snapshot_allocations_;
    int64_t offset = 0;
    for (size_t j = 0; j < plan.written().size(); ++j) {
      snapshot_ptrs_[j] = snapshot_.get() + offset;
      offset += plan.written()[j].nbytes;
    }
  }
  // The thread is idle and the job slot empty, so nothing reads the snapshot while we copy.
  int64_t offset = 0;
  for (const ShardPlan::Written& w : plan.written()) {
    std::memcpy(snapshot_.get() + offset, static_cast<const char*>(data[w.piece]) + w.offset,
                static_cast<size_t>(w.nbytes));
    offset += w.nbytes;
  }
  job_ = Job{step, std::move(state), std::move(rank_state)};
  lock.unlock();
  cv_.notify_all();
}

std::optional<SaveResult> AsyncCheckpointSaver::poll() {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_.empty()) return std::nullopt;
  SaveResult r = std::move(done_.front());
  done_.pop_front();
  return r;
}

std::optional<SaveResult> AsyncCheckpointSaver::wait() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !job_.has_value(); });
  }
  return poll();
}

bool AsyncCheckpointSaver::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_.has_value();
}

void AsyncCheckpointSaver::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || job_.has_value(); });
      if (!job_) return;  // stop_ and nothing queued
      job = *job_;        // the slot stays occupied until the result is in
    }
    if (before_write_) before_write_();
    SaveResult result = [&] {
      const TraceSpan span("checkpoint", "checkpoint write and commit");
      return saver_.save_written(job.step, snapshot_ptrs_, job.state, job.rank_state);
    }();
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.push_back(std::move(result));
      job_.reset();
    }
    cv_.notify_all();
  }
}

}  // namespace brigade
