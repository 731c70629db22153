#include "brigade/sync/ps/ps_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "brigade/base/error.h"
#include "brigade/base/stop_after.h"

namespace brigade {

namespace {

// pending_pull_ of worker 0's drain (dynamic): answered by others_finished, not by a clock.
constexpr int64_t kDrainClock = std::numeric_limits<int64_t>::max();

// Whether every worker's flag is set.
bool all_set(const std::vector<char>& flags) {
  return std::all_of(flags.begin(), flags.end(), [](char f) { return f != 0; });
}

}  // namespace

PsConsistency parse_ps_consistency(const std::string& name) {
  if (name == "ssp") return PsConsistency::kSsp;
  if (name == "asp") return PsConsistency::kAsp;
  return PsConsistency::kBsp;
}

ParameterServer::ParameterServer(const PsServerOptions& options, const ParamLayout& layout,
                                 const OptimizerConfig& optimizer,
                                 std::function<void(const std::string&)> log)
    : options_(options),
      n_(options.end - options.begin),
      log_(std::move(log)),
      optimizer_(make_optimizer(optimizer, layout, options.begin, options.end)),
      state_(optimizer_->state_tensors()),
      params_(static_cast<size_t>(n_)),
      clock_(static_cast<size_t>(options.workers), 0),
      pushed_open_(static_cast<size_t>(options.workers), 0),
      applied_open_(static_cast<size_t>(options.workers), 0),
      stopped_(static_cast<size_t>(options.workers), 0),
      pending_pull_(static_cast<size_t>(options.workers), -1),
      left_(static_cast<size_t>(options.workers), 0),
      pending_join_(static_cast<size_t>(options.workers), 0),
      joined_(static_cast<size_t>(options.workers), 0),
      out_(static_cast<size_t>(options.workers), 0),
      last_heard_(static_cast<size_t>(options.workers), std::chrono::steady_clock::now()) {
  joined_[0] = 1;  // worker 0 starts the servers (kInit) and never joins
  if (options_.aggregate > 1) group_sum_.assign(static_cast<size_t>(n_), 0.0f);
  if (options_.consistency == PsConsistency::kBsp) {
    mean_.resize(static_cast<size_t>(n_));
    pushed_.assign(static_cast<size_t>(options.workers),
                   std::vector<float>(static_cast<size_t>(n_)));
  }
}

int64_t ParameterServer::state_values() const {
  return n_ * static_cast<int64_t>(1 + state_.size());
}

bool ParameterServer::done() const {
  if (!stopped_[0]) return false;
  for (size_t w = 1; w < stopped_.size(); ++w) {
    if (!stopped_[w] && !left_[w]) return false;
  }
  return true;
}

void ParameterServer::refuse(int worker, const std::string& why) {
  ++refused_;
  if (log_) log_(fmt::format("refused a message from worker {}: {}", worker, why));
}

PsHeader ParameterServer::reply_header(PsType type, int worker) const {
  PsHeader h;
  h.type = static_cast<uint32_t>(type);
  h.worker = static_cast<uint32_t>(worker);
  h.run_tag = options_.run_tag;
  h.clock = completed_clock();
  return h;
}

int64_t ParameterServer::completed_clock() const {
  int64_t lowest = -1, highest = 0;
  for (size_t w = 0; w < clock_.size(); ++w) {
    highest = std::max(highest, clock_[w]);
    if (!stopped_[w] && !left_[w] && !out_[w])
      lowest = lowest < 0 ? clock_[w] : std::min(lowest, clock_[w]);
  }
  return lowest < 0 ? highest : lowest;
}

bool ParameterServer::others_finished(int worker) const {
  for (size_t w = 0; w < clock_.size(); ++w) {
    if (static_cast<int>(w) != worker && !stopped_[w] && !left_[w] && !out_[w]) return false;
  }
  return true;
}

bool ParameterServer::pull_ready(int64_t clock) const {
  if (!initialized_) return false;
  if (clock == kDrainClock) return others_finished(0);
  if (next_cut_ >= 0 && clock >= clock_of(next_cut_)) return false;  // take_cuts() first
  switch (options_.consistency) {
    case PsConsistency::kBsp:
      return completed_clock() >= clock;
    case PsConsistency::kSsp:
      return completed_clock() >= clock - options_.staleness;
    case PsConsistency::kAsp:
      return true;
  }
  return false;
}

void ParameterServer::copy_state(float* out) const {
  std::copy(params_.begin(), params_.end(), out);
  for (size_t i = 0; i < state_.size(); ++i) {
    std::copy(state_[i].data, state_[i].data + n_, out + static_cast<int64_t>(i + 1) * n_);
  }
}

int64_t ParameterServer::cut_after(int64_t step) const {
  if (options_.consistency == PsConsistency::kBsp) return -1;  // every clock is one
  int64_t cut = options_.cut_every > 0 ? (step / options_.cut_every + 1) * options_.cut_every : -1;
  // Under dynamic assignment the end is the drain (ps_worker.h), which is a cut already.
  if (!options_.dynamic && end_step_ > step && (cut < 0 || cut > end_step_)) cut = end_step_;
  return cut >= 0 && cut <= end_step_ ? cut : -1;
}

void ParameterServer::take_cuts() {
  while (initialized_ && next_cut_ >= 0 && completed_clock() >= clock_of(next_cut_)) {
    apply_group();  // the open group's pushes are of clocks before the cut
    cut_state_.resize(static_cast<size_t>(state_values()));
    copy_state(cut_state_.data());
    cut_step_ = next_cut_;
    cut_applied_ = staleness_.applied;
    next_cut_ = cut_after(next_cut_);
  }
}

void ParameterServer::send_params(int worker, const Reply& reply) {
  PsHeader h = reply_header(PsType::kParams, worker);
  h.count = n_;
  reply(worker, encode_ps_message(h, params_.data(), &staleness_));
  last_heard_[static_cast<size_t>(worker)] = std::chrono::steady_clock::now();  // owes a push now
}

void ParameterServer::send_joined(int worker, const Reply& reply, bool again) {
  PsHeader h = reply_header(PsType::kJoined, worker);
  h.flags = again ? kPsFlagRejoin : 0;
  h.clock = clock_[static_cast<size_t>(worker)];
  h.updates = base_step_;
  reply(worker, encode_ps_message(h, nullptr));
  last_heard_[static_cast<size_t>(worker)] = std::chrono::steady_clock::now();
}

void ParameterServer::leave_silent(std::chrono::steady_clock::time_point now, const Reply& reply) {
  if (options_.consistency == PsConsistency::kBsp || options_.worker_timeout.count() <= 0) return;
  if (!initialized_) return;  // the workers are still starting
  bool changed = false;
  for (size_t w = 0; w < left_.size(); ++w) {
    // A worker waiting for a reply (a pull held by the bound, a join before init) owes nothing.
    if (stopped_[w] || left_[w] || out_[w] || !joined_[w] || pending_pull_[w] >= 0 ||
        pending_join_[w])
      continue;
    if (now - last_heard_[w] < options_.worker_timeout) continue;
    left_[w] = 1;
    ++left_events_;
    changed = true;
    if (log_) {
      log_(fmt::format(
          "worker {} sent nothing for {:.1f} s (ps.worker_timeout_s): it leaves the staleness "
          "bound at clock {}; the other workers go on",
          w, std::chrono::duration<double>(now - last_heard_[w]).count(), clock_[w]));
    }
  }
  if (changed) answer_ready_pulls(reply);
}

void ParameterServer::answer_ready_pulls(const Reply& reply) {
  // No worker is training: no push can complete the open group, so it is applied as it is.
  if (group_size_ > 0 && others_finished(-1)) apply_group();
  take_cuts();
  for (size_t w = 0; w < pending_pull_.size(); ++w) {
    if (pending_pull_[w] >= 0 && pull_ready(pending_pull_[w])) {
      pending_pull_[w] = -1;
      send_params(static_cast<int>(w), reply);
    }
  }
}

void ParameterServer::handle(int authenticated_worker, zmq::multipart_t&& frames,
                             const Reply& reply) {
  std::string why;
  std::optional<PsMessage> m =
      decode_ps_message(std::move(frames), options_.run_tag, state_values(), &why);
  if (!m) return refuse(authenticated_worker, why);
  const PsHeader& h = m->header;
  if (h.worker >= static_cast<uint32_t>(options_.workers)) {
    return refuse(authenticated_worker,
                  fmt::format("worker {} of {} workers", h.worker, options_.workers));
  }
  if (static_cast<int>(h.worker) != authenticated_worker) {
    return refuse(authenticated_worker,
                  fmt::format("claims to be worker {} but authenticated as worker {}", h.worker,
                              authenticated_worker));
  }
  const auto type = static_cast<PsType>(h.type);
  if (stopped_[h.worker]) return refuse(authenticated_worker, "the worker has stopped");
  if (left_[h.worker] && type != PsType::kJoin) {
    left_[h.worker] = 0;  // a stopped process continued: in the bound again
    if (log_) log_(fmt::format("worker {} is back at clock {}", h.worker, clock_[h.worker]));
  }
  switch (type) {
    case PsType::kInit:
      return on_init(*m, reply);
    case PsType::kPush:
      return on_push(*m, reply);
    case PsType::kApply:
      return on_apply(*m, reply);
    case PsType::kPushApply:
      return on_push_apply(*m, reply);
    case PsType::kPull:
      return on_pull(*m, reply);
    case PsType::kStateGet:
      return on_state_get(*m, reply);
    case PsType::kStop:
      return on_stop(*m, reply);
    case PsType::kJoin:
      return on_join(*m, reply);
    default:
      return refuse(authenticated_worker, fmt::format("a {} message, which only servers send",
                                                      ps_type_name(static_cast<PsType>(h.type))));
  }
}

void ParameterServer::on_init(const PsMessage& m, const Reply& reply) {
  const int w = static_cast<int>(m.header.worker);
  if (w != 0) return refuse(w, "init comes from worker 0 only");
  if (initialized_) return refuse(w, "the server is already initialised");
  if (m.header.count != state_values()) {
    return refuse(
        w, fmt::format("init of {} values (the range holds {})", m.header.count, state_values()));
  }
  std::memcpy(params_.data(), m.payload, static_cast<size_t>(n_) * sizeof(float));
  for (size_t i = 0; i < state_.size(); ++i) {
    std::memcpy(state_[i].data, m.payload + static_cast<int64_t>(i + 1) * n_,
                static_cast<size_t>(n_) * sizeof(float));
  }
  initialized_ = true;
  base_step_ = m.header.updates;
  end_step_ = invocation_end(options_.steps, base_step_, options_.stop_after);
  next_cut_ = cut_after(base_step_);
  // Dynamic clocks are global steps: no worker has a slice before the invocation's first.
  if (options_.dynamic) std::fill(clock_.begin(), clock_.end(), base_step_);
  last_heard_[0] = std::chrono::steady_clock::now();
  reply(w, encode_ps_message(reply_header(PsType::kAck, w), nullptr));
  for (size_t k = 0; k < pending_join_.size(); ++k) {
    if (!pending_join_[k]) continue;
    pending_join_[k] = 0;
    send_joined(static_cast<int>(k), reply, false);
  }
  answer_ready_pulls(reply);
}

void ParameterServer::on_push(const PsMessage& m, const Reply& reply) {
  const PsHeader& h = m.header;
  const int w = static_cast<int>(h.worker);
  if (options_.consistency != PsConsistency::kBsp) return refuse(w, "push is bsp's message");
  if (!initialized_) return refuse(w, "a push before init");
  if (h.clock != clock_[h.worker] || pushed_open_[h.worker]) {
    return refuse(w, fmt::format("a push of clock {} (expected {})", h.clock, clock_[h.worker]));
  }
  if (h.count != n_)
    return refuse(w, fmt::format("{} gradient values (the range has {})", h.count, n_));
  std::memcpy(pushed_[h.worker].data(), m.payload, static_cast<size_t>(n_) * sizeof(float));
  pushed_open_[h.worker] = 1;
  if (!all_set(pushed_open_)) return;
  // The mean in worker order, so the result does not depend on arrival order.
  const float inv = 1.0f / static_cast<float>(options_.workers);
  std::copy(pushed_[0].begin(), pushed_[0].end(), mean_.begin());
  for (size_t k = 1; k < pushed_.size(); ++k) {
    const float* g = pushed_[k].data();
    for (int64_t i = 0; i < n_; ++i) mean_[static_cast<size_t>(i)] += g[i];
  }
  double sum_squares = 0;
  for (float& v : mean_) {
    v *= inv;
    sum_squares += static_cast<double>(v) * v;
  }
  for (int k = 0; k < options_.workers; ++k) {
    PsHeader n = reply_header(PsType::kNorm, k);
    n.clock = h.clock;
    n.value = sum_squares;
    reply(k, encode_ps_message(n, nullptr));
  }
}

void ParameterServer::on_apply(const PsMessage& m, const Reply& reply) {
  const PsHeader& h = m.header;
  const int w = static_cast<int>(h.worker);
  if (options_.consistency != PsConsistency::kBsp) return refuse(w, "apply is bsp's message");
  if (h.clock != clock_[h.worker] || !pushed_open_[h.worker] || applied_open_[h.worker]) {
    return refuse(w, fmt::format("an apply of clock {} out of order", h.clock));
  }
  if (!all_set(pushed_open_)) {
    return refuse(w, "an apply before every worker pushed");
  }
  const bool first =
      std::none_of(applied_open_.begin(), applied_open_.end(), [](char a) { return a != 0; });
  if (first) {
    apply_ = h;
  } else if (h.lr != apply_.lr || h.scale != apply_.scale || h.updates != apply_.updates ||
             h.flags != apply_.flags) {
    return refuse(w, fmt::format("its update (lr {}, scale {}, update {}, flags {}) differs from "
                                 "worker {}'s",
                                 h.lr, h.scale, h.updates, h.flags, apply_.worker));
  }
  applied_open_[h.worker] = 1;
  if (!all_set(applied_open_)) {
    return;
  }
  if (!(apply_.flags & kPsFlagSkip)) {
    if (apply_.scale != 1.0f) {
      for (float& v : mean_) v *= apply_.scale;
    }
    optimizer_->step(params_.data() - options_.begin, mean_.data() - options_.begin, options_.begin,
                     options_.end, apply_.lr, apply_.updates);
    staleness_.add(0);
  }
  for (size_t k = 0; k < clock_.size(); ++k) {
    ++clock_[k];
    pushed_open_[k] = applied_open_[k] = 0;
  }
  for (int k = 0; k < options_.workers; ++k) send_params(k, reply);
}

void ParameterServer::on_push_apply(const PsMessage& m, const Reply& reply) {
  const PsHeader& h = m.header;
  const int w = static_cast<int>(h.worker);
  if (options_.consistency == PsConsistency::kBsp) return refuse(w, "bsp pushes then applies");
  if (!initialized_) return refuse(w, "a push before init");
  if (h.clock != clock_[h.worker]) {
    return refuse(w, fmt::format("a push of clock {} (expected {})", h.clock, clock_[h.worker]));
  }
  if (h.read_clock > h.clock) {
    return refuse(w,
                  fmt::format("read at clock {}, after its own clock {}", h.read_clock, h.clock));
  }
  const bool last = (h.flags & kPsFlagNoNext) != 0;
  if (!options_.dynamic && (last || h.next_clock != 0)) {
    return refuse(w, "a next clock, which only dynamic assignment sends");
  }
  if (options_.dynamic && !last && h.next_clock < h.clock) {
    return refuse(w, fmt::format("a next clock {} before its clock {} (slices are handed out in "
                                 "order)",
                                 h.next_clock, h.clock));
  }
  const bool skip = (h.flags & kPsFlagSkip) != 0;
  if (h.count != (skip ? 0 : n_)) {
    return refuse(w, fmt::format("{} gradient values (the range has {})", h.count, n_));
  }
  if (!skip) apply_push(m, h.clock - h.read_clock);
  // The pull of the next clock comes with the push, so that no other push can be applied
  // between them: with staleness 0 every worker then reads exactly the clocks before its own.
  if (!options_.dynamic) {
    pending_pull_[h.worker] = ++clock_[h.worker];
  } else if (last) {
    out_[h.worker] = 1;  // its last slice is applied: it holds no one back
  } else {
    pending_pull_[h.worker] = clock_[h.worker] = h.next_clock;
  }
  answer_ready_pulls(reply);
}

void ParameterServer::apply_push(const PsMessage& m, int64_t staleness) {
  const PsHeader& h = m.header;
  staleness_.add(staleness);
  const float weight =
      options_.staleness_lr && staleness > 1 ? 1.0f / static_cast<float>(staleness) : 1.0f;
  if (options_.aggregate <= 1) {
    optimizer_->step(params_.data() - options_.begin, m.payload - options_.begin, options_.begin,
                     options_.end, weight * h.lr / static_cast<float>(options_.workers), h.updates);
    return;
  }
  for (int64_t i = 0; i < n_; ++i) group_sum_[static_cast<size_t>(i)] += weight * m.payload[i];
  // The group steps at its newest push's schedule (a stale push carries an older lr).
  if (h.updates >= group_updates_) {
    group_updates_ = h.updates;
    group_lr_ = h.lr;
  }
  if (++group_size_ == options_.aggregate) apply_group();
}

void ParameterServer::apply_group() {
  if (group_size_ == 0) return;
  const float k = static_cast<float>(group_size_);
  for (float& v : group_sum_) v /= k;
  optimizer_->step(params_.data() - options_.begin, group_sum_.data() - options_.begin,
                   options_.begin, options_.end,
                   group_lr_ * k / static_cast<float>(options_.workers), group_updates_);
  std::fill(group_sum_.begin(), group_sum_.end(), 0.0f);
  group_size_ = 0;
  group_updates_ = -1;
}

void ParameterServer::on_pull(const PsMessage& m, const Reply& reply) {
  const PsHeader& h = m.header;
  const int w = static_cast<int>(h.worker);
  // After kJoin the worker resumes at the highest count any server has for it, at most one
  // ahead of this one's (it died between its pushes to two servers).
  const bool rejoin = (h.flags & kPsFlagRejoin) != 0 && joined_[h.worker];
  if ((h.flags & kPsFlagDrain) != 0) {
    if (!options_.dynamic || w != 0 || !out_[0]) {
      return refuse(w,
                    "a drain, which only worker 0 sends after its last slice under dynamic "
                    "assignment");
    }
    pending_pull_[0] = kDrainClock;
    return answer_ready_pulls(reply);
  }
  // Dynamic: the clock of the slice the worker takes, never before its last one.
  if (options_.dynamic ? h.clock < clock_[h.worker]
      : rejoin         ? (h.clock < clock_[h.worker] || h.clock > clock_[h.worker] + 1)
                       : h.clock != clock_[h.worker]) {
    return refuse(
        w, fmt::format("a pull for clock {} (the worker is at {})", h.clock, clock_[h.worker]));
  }
  clock_[h.worker] = h.clock;
  pending_pull_[h.worker] = h.clock;
  out_[h.worker] = 0;  // a restarted worker takes slices again
  answer_ready_pulls(reply);
}

void ParameterServer::on_state_get(const PsMessage& m, const Reply& reply) {
  const int w = static_cast<int>(m.header.worker);
  if (!initialized_) return refuse(w, "state requested before init");
  PsHeader h = reply_header(PsType::kState, w);
  h.count = state_values();
  if (cut_step_ >= 0 && m.header.updates == cut_step_) {
    h.flags = kPsFlagCut;
    h.updates = cut_applied_;
    return reply(w, encode_ps_message(h, cut_state_.data()));
  }
  apply_group();  // what is saved holds every push received
  // bsp: every clock is a cut; ssp/asp: only when no worker trains any more (the drain).
  if (options_.consistency == PsConsistency::kBsp || others_finished(0)) h.flags = kPsFlagCut;
  h.updates = staleness_.applied;
  std::vector<float> all(static_cast<size_t>(state_values()));
  copy_state(all.data());
  reply(w, encode_ps_message(h, all.data()));
}

void ParameterServer::on_join(const PsMessage& m, const Reply& reply) {
  const int w = static_cast<int>(m.header.worker);
  if (w == 0) return refuse(w, "worker 0 starts the servers with init; it does not join");
  const bool again = joined_[static_cast<size_t>(w)] != 0;
  if (again) {
    ++rejoins_;
    if (log_) {
      log_(fmt::format("worker {} joins again (restarted) at clock {}", w,
                       clock_[static_cast<size_t>(w)]));
    }
  }
  joined_[static_cast<size_t>(w)] = 1;
  left_[static_cast<size_t>(w)] = 0;
  pending_pull_[static_cast<size_t>(w)] = -1;  // its predecessor's, which nobody will read
  if (!initialized_) {
    pending_join_[static_cast<size_t>(w)] = 1;
    return;
  }
  send_joined(w, reply, again);
}

void ParameterServer::on_stop(const PsMessage& m, const Reply& reply) {
  stopped_[m.header.worker] = 1;
  pending_pull_[m.header.worker] = -1;
  answer_ready_pulls(reply);  // under ssp the others no longer wait for it
}

void ParameterServer::serve(CurveServerSocket& socket, const std::function<void()>& refresh_keys) {
  using Clock = std::chrono::steady_clock;
  std::vector<zmq::message_t> identity(static_cast<size_t>(options_.workers));
  std::vector<char> known(static_cast<size_t>(options_.workers), 0);
  const Reply reply = [&](int worker, zmq::multipart_t&& frames) {
    if (!known[static_cast<size_t>(worker)]) return;  // never heard from: nothing to answer
    socket.send(identity[static_cast<size_t>(worker)], std::move(frames));
  };
  // Without failure handling one wait covers it all; with it the server wakes to notice a
  // silent worker and to admit a restarted one's key.
  const bool watch =
      options_.consistency != PsConsistency::kBsp && options_.worker_timeout.count() > 0;
  const std::chrono::milliseconds tick =
      watch ? std::clamp(options_.worker_timeout / 4, std::chrono::milliseconds(50),
                         std::chrono::milliseconds(1000))
            : options_.timeout;
  Clock::time_point last_message = Clock::now(), last_refresh{};
  for (auto& t : last_heard_) t = last_message;
  while (!done()) {
    Clock::time_point now = Clock::now();
    if (refresh_keys && now - last_refresh >= tick) {
      refresh_keys();
      last_refresh = now;
    }
    const auto quiet_left = std::chrono::duration_cast<std::chrono::milliseconds>(
        options_.timeout - (now - last_message));
    std::optional<CurveServerSocket::Received> r =
        socket.receive(std::clamp(quiet_left, std::chrono::milliseconds(0), tick));
    now = Clock::now();
    if (!r && now - last_message < options_.timeout) {
      leave_silent(now, reply);
      continue;
    }
    if (!r) {
      std::string silent;
      for (size_t w = 0; w < stopped_.size(); ++w) {
        if (!stopped_[w]) silent += (silent.empty() ? "" : ", ") + std::to_string(w);
      }
      throw CommError(CommError::Kind::kTimeout,
                      fmt::format("parameter server {}: no message from any worker for {} s "
                                  "(workers still running: {})",
                                  options_.index, options_.timeout.count() / 1000.0, silent));
    }
    if (r->peer < 0 || r->peer >= options_.workers) {
      refuse(r->peer, "a connection without a worker's key");
      continue;
    }
    const size_t w = static_cast<size_t>(r->peer);
    identity[w].copy(r->identity);  // a reconnected worker has a new routing id
    known[w] = 1;
    last_message = last_heard_[w] = now;
    handle(r->peer, std::move(r->frames), reply);
    leave_silent(now, reply);
  }
}

}  // namespace brigade
