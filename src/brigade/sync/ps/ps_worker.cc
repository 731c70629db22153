#include "brigade/sync/ps/ps_worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/stop_after.h"
#include "brigade/monitor/timer.h"
#include "brigade/optim/grad_clip.h"
#include "brigade/sync/ps/ps_rendezvous.h"

namespace brigade {

namespace {

int64_t frames_bytes(const zmq::multipart_t& frames) {
  int64_t n = 0;
  for (const zmq::message_t& f : frames) n += static_cast<int64_t>(f.size());
  return n;
}

}  // namespace

PsWorker::PsWorker(Model& model, const OptimizerConfig& optimizer, const PsWorkerOptions& options,
                   Store& store)
    : model_(model), options_(options), store_(store), keys_(CurveKeyPair::generate()) {
  const std::vector<PsServerAddress> servers =
      ps_worker_rendezvous(store, options_.worker, options_.servers, keys_, &run_tag_);
  slices_key_ = fmt::format("ps/slices/{:016x}", run_tag_);
  for (int k = 0; k < options_.servers; ++k) {
    ranges_.push_back(ps_server_range(model_.num_params(), options_.servers, k));
    links_.push_back(std::make_unique<CurveClientLink>(keys_,
                                                       servers[static_cast<size_t>(k)].public_key,
                                                       servers[static_cast<size_t>(k)].endpoint));
  }
  if (options_.worker == 0) {
    staging_ = make_optimizer(optimizer, model_.layout(), 0, model_.num_params());
  }
}

PsWorker::~PsWorker() {
  for (int k = 0; k < options_.servers; ++k) {
    try {
      send(k, header(PsType::kStop), nullptr);
    } catch (const std::exception&) {
      // The server is gone already; nothing waits for this worker.
    }
  }
}

Optimizer& PsWorker::optimizer() {
  BRIGADE_CHECK(staging_) << "only worker 0 of a parameter-server job holds optimizer state";
  return *staging_;
}

PsHeader PsWorker::header(PsType type) const {
  PsHeader h;
  h.type = static_cast<uint32_t>(type);
  h.worker = static_cast<uint32_t>(options_.worker);
  h.run_tag = run_tag_;
  h.clock = clock_;
  return h;
}

void PsWorker::send(int k, const PsHeader& h, const float* payload) {
  zmq::multipart_t frames = encode_ps_message(h, payload);
  const PsType type = static_cast<PsType>(h.type);
  const OpKind kind = type == PsType::kPush || type == PsType::kPushApply || type == PsType::kInit
                          ? OpKind::kPush
                          : OpKind::kPull;
  stats_.record(kind, frames_bytes(frames), 0, 0);
  links_[static_cast<size_t>(k)]->send(std::move(frames));
}

PsMessage PsWorker::receive(int k, PsType type) {
  const auto [begin, end] = ranges_[static_cast<size_t>(k)];
  std::optional<zmq::multipart_t> frames =
      links_[static_cast<size_t>(k)]->receive(options_.timeout);
  if (!frames) {
    throw CommError(CommError::Kind::kTimeout,
                    fmt::format("worker {}: parameter server {} ({}) sent no {} within {} s",
                                options_.worker, k, links_[static_cast<size_t>(k)]->endpoint(),
                                ps_type_name(type), options_.timeout.count() / 1000.0));
  }
  const int64_t bytes = frames_bytes(*frames);
  std::string why;
  // The largest reply is kState: parameters and up to two optimizer buffers of the range.
  std::optional<PsMessage> m =
      decode_ps_message(std::move(*frames), run_tag_, 3 * (end - begin), &why);
  if (m && static_cast<PsType>(m->header.type) != type) {
    why = fmt::format("a {} message where {} was expected",
                      ps_type_name(static_cast<PsType>(m->header.type)), ps_type_name(type));
    m.reset();
  }
  if (!m) {
    throw CommError(CommError::Kind::kOther,
                    fmt::format("worker {}: parameter server {} sent {}", options_.worker, k, why));
  }
  stats_.record(OpKind::kPull, 0, bytes, 1);
  return std::move(*m);
}

void PsWorker::pull_params() {
  int64_t read = -1;
  for (int k = 0; k < options_.servers; ++k) {
    const auto [begin, end] = ranges_[static_cast<size_t>(k)];
    PsMessage m = receive(k, PsType::kParams);
    if (m.header.count != end - begin) {
      throw CommError(CommError::Kind::kOther,
                      fmt::format("worker {}: parameter server {} sent {} parameters (its range "
                                  "has {})",
                                  options_.worker, k, m.header.count, end - begin));
    }
    std::memcpy(model_.params() + begin, m.payload,
                static_cast<size_t>(end - begin) * sizeof(float));
    read = read < 0 ? m.header.clock : std::min(read, m.header.clock);
    if (m.staleness && k == 0) staleness_ = *m.staleness;
    if (m.staleness && k > 0) staleness_.max = std::max(staleness_.max, m.staleness->max);
  }
  read_clock_ = read;
}

double PsWorker::finish_gradients() {
  if (independent_steps()) {
    sum_squares_ = brigade::grad_sum_squares(model_.grads(), model_.num_params());
    return 0.0;
  }
  Stopwatch wait;
  for (int k = 0; k < options_.servers; ++k) {
    const auto [begin, end] = ranges_[static_cast<size_t>(k)];
    PsHeader h = header(PsType::kPush);
    h.count = end - begin;
    send(k, h, model_.grads() + begin);
  }
  sum_squares_ = 0;
  for (int k = 0; k < options_.servers; ++k) sum_squares_ += receive(k, PsType::kNorm).header.value;
  return wait.seconds();
}

void PsWorker::scale_grads(float scale) {
  if (independent_steps()) {
    brigade::scale_grads(model_.grads(), model_.num_params(), scale);
  } else {
    scale_ = scale;  // the servers scale the mean
  }
}

void PsWorker::apply(float lr, int64_t updates, bool skip) {
  for (int k = 0; k < options_.servers; ++k) {
    PsHeader h = header(PsType::kApply);
    h.lr = lr;
    h.scale = scale_;
    h.updates = updates;
    h.flags = skip ? kPsFlagSkip : 0;
    send(k, h, nullptr);
  }
  ++clock_;
  scale_ = 1.0f;
  pull_params();
}

void PsWorker::push_apply(float lr, int64_t updates, bool skip) {
  const int64_t clock = clock_;
  if (options_.dynamic) take_slice();  // the push carries the next slice's clock
  const bool last = options_.dynamic && slice_ < 0;
  for (int k = 0; k < options_.servers; ++k) {
    const auto [begin, end] = ranges_[static_cast<size_t>(k)];
    PsHeader h = header(PsType::kPushApply);
    h.clock = clock;
    h.read_clock = read_clock_;
    h.lr = lr;
    h.updates = updates;
    h.flags = (skip ? kPsFlagSkip : 0) | (last ? kPsFlagNoNext : 0);
    h.next_clock = options_.dynamic && !last ? clock_ : 0;
    h.count = skip ? 0 : end - begin;
    send(k, h, skip ? nullptr : model_.grads() + begin);
  }
  if (!options_.dynamic) {
    ++clock_;
    pull_params();  // the push is also the pull of the next clock
    return;
  }
  ++slices_trained_;
  if (!last) {
    pull_params();
  } else if (options_.worker == 0) {
    drain();
  }
}

void PsWorker::take_slice() {
  const int64_t n = options_.workers;
  const int64_t end = invocation_end(options_.steps, base_step_, options_.stop_after);
  const int64_t u = base_step_ * n + store_.add(slices_key_, 1) - 1;
  slice_ = u < end * n ? u : -1;
  if (slice_ >= 0) clock_ = slice_ / n;
}

std::optional<PsWorker::Slice> PsWorker::slice() const {
  if (slice_ < 0) return std::nullopt;
  return Slice{.step = slice_ / options_.workers, .part = slice_ % options_.workers};
}

void PsWorker::drain() {
  for (int k = 0; k < options_.servers; ++k) {
    PsHeader h = header(PsType::kPull);
    h.flags = kPsFlagDrain;
    send(k, h, nullptr);
  }
  pull_params();
}

void PsWorker::pull_first() {
  take_slice();
  if (slice_ < 0) return;  // the others trained every slice already: nothing to pull
  for (int k = 0; k < options_.servers; ++k) send(k, header(PsType::kPull), nullptr);
  pull_params();
}

void PsWorker::step(float lr, int64_t step) {
  independent_steps() ? push_apply(lr, step, false) : apply(lr, step, false);
}

void PsWorker::skip_step(int64_t updates) {
  independent_steps() ? push_apply(0.0f, updates, true) : apply(0.0f, updates, true);
}

void PsWorker::prepare_checkpoint(int64_t step) {
  if (!staging_) return;
  std::vector<StateView> state = staging_->state_tensors();
  for (int k = 0; k < options_.servers; ++k) {
    PsHeader h = header(PsType::kStateGet);
    h.updates = step;
    send(k, h, nullptr);
  }
  saved_ = SavedState{};
  for (int k = 0; k < options_.servers; ++k) {
    const auto [begin, end] = ranges_[static_cast<size_t>(k)];
    const int64_t n = end - begin;
    PsMessage m = receive(k, PsType::kState);
    saved_.cut = saved_.cut && (m.header.flags & kPsFlagCut) != 0;
    if (k == 0) saved_.updates_applied = m.header.updates;
    if (m.header.count != n * static_cast<int64_t>(1 + state.size())) {
      throw CommError(CommError::Kind::kOther,
                      fmt::format("parameter server {} sent {} state values (expected {})", k,
                                  m.header.count, n * static_cast<int64_t>(1 + state.size())));
    }
    std::memcpy(model_.params() + begin, m.payload, static_cast<size_t>(n) * sizeof(float));
    for (size_t i = 0; i < state.size(); ++i) {
      std::memcpy(state[i].data + begin, m.payload + static_cast<int64_t>(i + 1) * n,
                  static_cast<size_t>(n) * sizeof(float));
    }
  }
}

std::vector<StatePiece> PsWorker::checkpoint_pieces() {
  if (!staging_) return {};
  std::vector<StatePiece> pieces = whole_param_pieces(model_);
  for (StatePiece& p : optimizer_state_pieces(*staging_, model_.layout(), 0, model_.num_params())) {
    pieces.push_back(std::move(p));
  }
  return pieces;
}

void PsWorker::after_restore(bool /*resumed*/) {
  if (staging_) {
    // The parameters every worker initialised alike (or worker 0 restored), and the optimizer
    // state (zero, or restored), to the servers that will own them.
    std::vector<StateView> state = staging_->state_tensors();
    std::vector<float> init;
    for (int k = 0; k < options_.servers; ++k) {
      const auto [begin, end] = ranges_[static_cast<size_t>(k)];
      init.assign(model_.params() + begin, model_.params() + end);
      for (const StateView& s : state) init.insert(init.end(), s.data + begin, s.data + end);
      PsHeader h = header(PsType::kInit);
      h.count = static_cast<int64_t>(init.size());
      h.updates = start_step_;
      send(k, h, init.data());
    }
    for (int k = 0; k < options_.servers; ++k) receive(k, PsType::kAck);
    base_step_ = start_step_;
    if (options_.dynamic) return pull_first();
    for (int k = 0; k < options_.servers; ++k) send(k, header(PsType::kPull), nullptr);
    pull_params();
    return;
  }
  // Join: continue at the highest clock a server has for this worker (they differ by one when
  // a predecessor died between its pushes to two servers).
  for (int k = 0; k < options_.servers; ++k) send(k, header(PsType::kJoin), nullptr);
  int64_t clock = 0, base = 0;
  bool again = false;
  for (int k = 0; k < options_.servers; ++k) {
    const PsMessage m = receive(k, PsType::kJoined);
    again |= (m.header.flags & kPsFlagRejoin) != 0;
    if (k > 0 && m.header.updates != base) {
      throw CommError(CommError::Kind::kOther,
                      fmt::format("worker {}: parameter servers 0 and {} started at different "
                                  "steps ({} and {})",
                                  options_.worker, k, base, m.header.updates));
    }
    clock = std::max(clock, m.header.clock);
    base = m.header.updates;
  }
  base_step_ = base;
  if (options_.dynamic) {
    pull_first();  // the loop takes its steps from the slices
    if (again) joined_step_ = slice_ >= 0 ? clock_ : base;
    return;
  }
  clock_ = clock;
  for (int k = 0; k < options_.servers; ++k) {
    PsHeader h = header(PsType::kPull);
    h.flags = kPsFlagRejoin;
    send(k, h, nullptr);
  }
  pull_params();
  if (again) joined_step_ = base + clock;
}

}  // namespace brigade
