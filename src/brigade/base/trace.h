#pragma once
// A timeline of chosen training steps (monitor.trace_steps = [a, b]) in the Chrome trace event
// format that Perfetto and chrome://tracing open: every rank records spans — the step and its
// parts, forward and backward of every block (or pipeline stage action), every collective with
// its bytes, the optimizer, evaluation, checkpoints — and rank 0 writes all ranks' spans into
// runs/<name>/trace.json, one process per rank, one track per thread.
//
// Recording is off outside the window: a TraceSpan then costs one relaxed atomic load, so the
// hooks stay in hot paths. In the window a span takes two clock reads and one append under a
// mutex (the training and communication threads both record). Timestamps are the monotonic
// clock in microseconds, which all ranks of one machine share.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace brigade {

class Tracer {
 public:
  static Tracer& instance();

  bool active() const { return active_.load(std::memory_order_relaxed); }
  // Starts recording (dropping anything recorded before).
  void start();
  // Stops recording and returns this process's spans as a JSON array of Chrome trace events
  // (pid = rank, tid = a small thread number, with a thread_name record for every thread).
  nlohmann::json stop(int rank);

  void add(std::string name, const char* category, std::chrono::steady_clock::time_point begin,
           std::chrono::steady_clock::time_point end, nlohmann::json args);

 private:
  struct Span {
    std::string name;
    const char* category;
    double ts_us, dur_us;
    int tid;
    nlohmann::json args;
  };
  std::atomic<bool> active_{false};
  std::mutex mu_;
  std::vector<Span> spans_;
  std::vector<std::string> thread_names_;  // by tid
};

// Records [construction, destruction) as a span when the tracer is active at construction.
class TraceSpan {
 public:
  TraceSpan(const char* category, std::string name);
  // For names built only when tracing (a block index): fn() -> std::string.
  template <typename Fn>
  static TraceSpan lazy(const char* category, Fn&& fn) {
    return Tracer::instance().active() ? TraceSpan(category, fn()) : TraceSpan();
  }
  TraceSpan(TraceSpan&& other) noexcept
      : on_(other.on_),
        category_(other.category_),
        name_(std::move(other.name_)),
        begin_(other.begin_),
        args_(std::move(other.args_)) {
    other.on_ = false;
  }
  TraceSpan& operator=(TraceSpan&&) = delete;
  ~TraceSpan();
  // Arguments shown with the span (bytes of a collective).
  void set(const char* key, nlohmann::json value);

 private:
  TraceSpan() = default;
  bool on_ = false;
  const char* category_ = "";
  std::string name_;
  std::chrono::steady_clock::time_point begin_;
  nlohmann::json args_;
};

// Merges every rank's events (stop()'s arrays, in rank order) into one trace document.
nlohmann::json chrome_trace(const std::vector<nlohmann::json>& rank_events);

}  // namespace brigade
