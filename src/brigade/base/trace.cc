#include "brigade/base/trace.h"

#include <pthread.h>

namespace brigade {

namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
}

// This thread's number in the current window's thread table, registering it (and its name,
// as name_this_thread set it) on first use. Called under the tracer's mutex.
int thread_number(std::vector<std::string>& names, std::vector<pthread_t>& ids) {
  const pthread_t self = pthread_self();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (pthread_equal(ids[i], self)) return static_cast<int>(i);
  }
  char name[32] = "thread";
  pthread_getname_np(self, name, sizeof(name));
  ids.push_back(self);
  names.emplace_back(name);
  return static_cast<int>(ids.size() - 1);
}

std::vector<pthread_t>& thread_ids() {
  static std::vector<pthread_t> ids;  // guarded by the tracer's mutex
  return ids;
}

}  // namespace

Tracer& Tracer::instance() {
  static Tracer tracer;
  return tracer;
}

void Tracer::start() {
  std::lock_guard<std::mutex> lock(mu_);
  spans_.clear();
  thread_names_.clear();
  thread_ids().clear();
  active_.store(true, std::memory_order_relaxed);
}

nlohmann::json Tracer::stop(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  active_.store(false, std::memory_order_relaxed);
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"ph", "M"},
                    {"name", "process_name"},
                    {"pid", rank},
                    {"tid", 0},
                    {"args", {{"name", "rank " + std::to_string(rank)}}}});
  for (size_t t = 0; t < thread_names_.size(); ++t) {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", rank},
                      {"tid", t},
                      {"args", {{"name", thread_names_[t]}}}});
  }
  for (const Span& s : spans_) {
    nlohmann::json e = {{"ph", "X"},    {"name", s.name}, {"cat", s.category}, {"pid", rank},
                        {"tid", s.tid}, {"ts", s.ts_us},  {"dur", s.dur_us}};
    if (!s.args.is_null()) e["args"] = s.args;
    events.push_back(std::move(e));
  }
  spans_.clear();
  return events;
}

void Tracer::add(std::string name, const char* category, Clock::time_point begin,
                 Clock::time_point end, nlohmann::json args) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!active()) return;  // stopped while the span was open
  spans_.push_back({std::move(name), category, micros(begin), micros(end) - micros(begin),
                    thread_number(thread_names_, thread_ids()), std::move(args)});
}

TraceSpan::TraceSpan(const char* category, std::string name) {
  if (!Tracer::instance().active()) return;
  on_ = true;
  category_ = category;
  name_ = std::move(name);
  begin_ = Clock::now();
}

TraceSpan::~TraceSpan() {
  if (on_) Tracer::instance().add(std::move(name_), category_, begin_, Clock::now(), args_);
}

void TraceSpan::set(const char* key, nlohmann::json value) {
  if (on_) args_[key] = std::move(value);
}

nlohmann::json chrome_trace(const std::vector<nlohmann::json>& rank_events) {
  nlohmann::json events = nlohmann::json::array();
  for (const auto& r : rank_events) {
    for (const auto& e : r) events.push_back(e);
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace brigade
