#include "brigade/comm/op_queue.h"

#include "brigade/base/thread_name.h"

namespace brigade::detail {

OpError current_op_error() {
  try {
    throw;
  } catch (const CommError& e) {
    return OpError{e.kind(), e.what()};
  } catch (const std::exception& e) {
    return OpError{CommError::Kind::kOther, e.what()};
  } catch (...) {
    return OpError{CommError::Kind::kOther, "unknown exception"};
  }
}

void WorkState::finish(std::optional<OpError> error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

std::optional<OpError> WorkState::wait_for_result() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return error_;
}

void WorkState::wait() const {
  std::optional<OpError> error = wait_for_result();
  if (error) throw CommError(error->kind, error->message);
}

bool WorkState::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

OpQueue::OpQueue() : worker_([this] { loop(); }) {}

OpQueue::~OpQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

std::shared_ptr<WorkState> OpQueue::submit(std::function<void()> fn) {
  auto state = std::make_shared<WorkState>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(Item{std::move(fn), state});
  }
  cv_.notify_one();
  return state;
}

void OpQueue::loop() {
  name_this_thread("brigade-comm");
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !items_.empty(); });
      if (items_.empty()) return;  // stop_ and drained
      item = std::move(items_.front());
      items_.pop_front();
    }
    std::optional<OpError> error;
    try {
      item.fn();
    } catch (...) {
      error = current_op_error();
    }
    item.state->finish(std::move(error));
  }
}

}  // namespace brigade::detail
