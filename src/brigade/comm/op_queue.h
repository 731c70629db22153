#pragma once
// The per-communicator FIFO that makes every operation asynchronous (internal).
// One worker thread runs submitted operations one at a time in submission order: a Gloo context
// is not safe for concurrent collectives, and the order must match on every rank anyway.
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "brigade/base/error.h"
#include "brigade/comm/communicator.h"

namespace brigade::detail {

// Why an operation failed. Kept as plain data, and each waiter throws its own CommError, so no
// exception object is shared between the worker and the waiting threads.
struct OpError {
  CommError::Kind kind = CommError::Kind::kOther;
  std::string message;
};

// The OpError for the exception being handled (call inside a catch block).
OpError current_op_error();

// Completion of one operation, shared by the worker and the Work handle.
class WorkState {
 public:
  void finish(std::optional<OpError> error);  // nullopt: success
  // Blocks until finished; throws CommError if the operation failed.
  void wait() const;
  // Blocks until finished; returns the failure (nullopt on success) instead of throwing.
  std::optional<OpError> wait_for_result() const;
  bool done() const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::optional<OpError> error_;
};

class OpQueue {
 public:
  OpQueue();
  // Runs everything still queued, then stops the worker.
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // Queues fn; the returned state finishes when fn returns or throws.
  std::shared_ptr<WorkState> submit(std::function<void()> fn);

 private:
  struct Item {
    std::function<void()> fn;
    std::shared_ptr<WorkState> state;
  };
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool stop_ = false;
  std::thread worker_;
};

// Work handle for an operation that runs entirely on the queue.
class QueuedWork final : public Work {
 public:
  explicit QueuedWork(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}
  ~QueuedWork() override { state_->wait_for_result(); }
  void wait() override { state_->wait(); }
  bool is_completed() const override { return state_->done(); }

 private:
  std::shared_ptr<WorkState> state_;
};

}  // namespace brigade::detail
