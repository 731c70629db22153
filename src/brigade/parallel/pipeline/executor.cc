// Pipeline executor: one loop over this rank's actions; the overlap and deadlock argument is in
// executor.h.
#include "brigade/parallel/pipeline/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/trace.h"

namespace brigade {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int64_t bytes(int64_t floats) {
  return floats * static_cast<int64_t>(sizeof(float));
}

}  // namespace

struct PipelineExecutor::Slot {
  float* input = nullptr;   // activation received from the previous stage
  float* saved = nullptr;   // the stage's saved buffer (or scratch under recomputation)
  float* output = nullptr;  // activation sent to the next stage
  float* dout = nullptr;    // gradient of output, received from the next stage
  bool saved_owned = false;
  std::unique_ptr<Work> input_recv, output_send, dout_recv;
};

PipelineExecutor::PipelineExecutor(Communicator& comm, const Schedule& schedule,
                                   std::vector<PipelineStage*> chunks, ExecutorOptions options)
    : comm_(comm),
      schedule_(schedule),
      chunks_(std::move(chunks)),
      options_(std::move(options)),
      rank_(comm.rank()) {
  const PipelineShape& shape = schedule_.shape;
  if (comm_.size() != shape.ranks)
    throw ConfigError("pipeline: communicator has " + std::to_string(comm_.size()) +
                      " ranks, schedule " + std::to_string(shape.ranks));
  if (static_cast<int>(chunks_.size()) != shape.virtual_stages)
    throw ConfigError("pipeline: " + std::to_string(chunks_.size()) + " chunks on rank " +
                      std::to_string(rank_) +
                      ", schedule has virtual_stages = " + std::to_string(shape.virtual_stages));
  for (PipelineStage* c : chunks_) BRIGADE_CHECK(c != nullptr) << "null pipeline stage";
  if (options_.recompute.empty()) options_.recompute.assign(chunks_.size(), false);
  BRIGADE_CHECK(options_.recompute.size() == chunks_.size())
      << "recompute has " << options_.recompute.size() << " entries for " << chunks_.size()
      << " chunks";
  slots_.resize(static_cast<size_t>(shape.micro_batches * shape.virtual_stages));
  scratch_.resize(chunks_.size());
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (options_.recompute[c]) {
      scratch_[c].resize(
          static_cast<size_t>(chunks_[c]->saved_floats() + chunks_[c]->output_floats()));
    }
  }
}

PipelineExecutor::~PipelineExecutor() = default;

PipelineExecutor::Slot& PipelineExecutor::slot(const Action& a) {
  return slots_[static_cast<size_t>(a.mb * schedule_.shape.virtual_stages + a.chunk)];
}

void PipelineExecutor::post_input_recv(size_t index) {
  const std::vector<Action>& actions = schedule_.ranks[rank_];
  if (index >= actions.size()) return;
  const Action& a = actions[index];
  if (a.kind != ActionKind::kForward || a.recv_from < 0) return;
  Slot& s = slot(a);
  if (s.input_recv) return;
  const int64_t n = chunks_[a.chunk]->input_floats();
  s.input = pool_.acquire(n);
  s.input_recv = comm_.recv_async(s.input, bytes(n), a.recv_from, a.recv_tag);
}

void PipelineExecutor::forward(const Action& a, StepStats& stats) {
  PipelineStage& stage = *chunks_[a.chunk];
  Slot& s = slot(a);
  if (a.recv_from >= 0) {
    post_input_recv(static_cast<size_t>(&a - schedule_.ranks[rank_].data()));
    s.input_recv->wait();
    s.input_recv.reset();
  }
  const bool recompute = options_.recompute[a.chunk];
  if (recompute) {
    s.saved = scratch_[a.chunk].data();
  } else {
    s.saved = pool_.acquire(stage.saved_floats());
    s.saved_owned = true;
  }
  if (a.send_to >= 0) s.output = pool_.acquire(stage.output_floats());
  ++live_slots_;
  stats.peak_slots = std::max(stats.peak_slots, live_slots_);

  const auto t = Clock::now();
  stats.loss += stage.forward(a.mb, s.input, s.output, s.saved);
  const double dt = seconds_since(t);
  stats.busy_s += dt;
  stats.forward_s += dt;

  if (a.send_to >= 0) {
    const int64_t n = stage.output_floats();
    s.output_send = comm_.send_async(s.output, bytes(n), a.send_to, a.send_tag);
    // The next stage sends this output's gradient back from the same rank it sent to.
    s.dout = pool_.acquire(n);
    const int stage_index = schedule_.global_stage(rank_, a.chunk);
    s.dout_recv = comm_.recv_async(s.dout, bytes(n), a.send_to,
                                   gradient_tag(stage_index, a.mb, schedule_.shape.micro_batches));
  }
}

void PipelineExecutor::backward_input(const Action& a, StepStats& stats, bool send_now) {
  PipelineStage& stage = *chunks_[a.chunk];
  Slot& s = slot(a);
  drain_gradient_sends();
  if (s.output_send) {
    s.output_send->wait();
    s.output_send.reset();
    pool_.release(s.output);
    s.output = nullptr;
  }
  if (s.dout_recv) {
    s.dout_recv->wait();
    s.dout_recv.reset();
  }
  if (options_.recompute[a.chunk]) {
    s.saved = pool_.acquire(stage.saved_floats());
    s.saved_owned = true;
    float* throwaway = scratch_[a.chunk].data() + stage.saved_floats();
    const auto t = Clock::now();
    stage.forward(a.mb, s.input, stage.output_floats() > 0 ? throwaway : nullptr, s.saved);
    const double dt = seconds_since(t);
    stats.busy_s += dt;
    stats.recompute_s += dt;
  }
  float* dinput = a.send_to >= 0 ? pool_.acquire(stage.input_floats()) : nullptr;
  pending_dinput_ = dinput;
  const auto t = Clock::now();
  stage.backward_input(a.mb, s.input, s.dout, dinput, s.saved);
  const double dt = seconds_since(t);
  stats.busy_s += dt;
  stats.input_grad_s += dt;
  pool_.release(s.dout);
  s.dout = nullptr;
  if (send_now) send_input_gradient(a);
}

void PipelineExecutor::send_input_gradient(const Action& a) {
  float* dinput = pending_dinput_;
  pending_dinput_ = nullptr;
  if (dinput == nullptr) return;
  gradient_sends_.emplace_back(
      comm_.send_async(dinput, bytes(chunks_[a.chunk]->input_floats()), a.send_to, a.send_tag),
      dinput);
}

void PipelineExecutor::backward_weight(const Action& a, StepStats& stats) {
  PipelineStage& stage = *chunks_[a.chunk];
  Slot& s = slot(a);
  const auto t = Clock::now();
  stage.backward_weight(a.mb, s.input, s.saved);
  const double dt = seconds_since(t);
  stats.busy_s += dt;
  stats.weight_grad_s += dt;
  if (s.saved_owned) pool_.release(s.saved);
  s.saved = nullptr;
  s.saved_owned = false;
  pool_.release(s.input);
  s.input = nullptr;
  --live_slots_;
}

void PipelineExecutor::drain_gradient_sends() {
  for (auto& [work, buffer] : gradient_sends_) {
    work->wait();
    pool_.release(buffer);
  }
  gradient_sends_.clear();
}

StepStats PipelineExecutor::run_step() {
  StepStats stats;
  pool_.reset_peak();
  const auto start = Clock::now();
  const std::vector<Action>& actions = schedule_.ranks[rank_];
  post_input_recv(0);
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    post_input_recv(i + 1);  // overlaps the next forward's input with this action
    const TraceSpan span = TraceSpan::lazy("pipeline", [&] {
      return fmt::format("{} mb {} chunk {}", action_kind_name(a.kind), a.mb, a.chunk);
    });
    switch (a.kind) {
      case ActionKind::kForward:
        forward(a, stats);
        break;
      case ActionKind::kBackward:
        // A fused backward sends its input gradient when the whole action is done, as the
        // schedule's analysis (and an autograd backward) has it; sending between the B and W
        // halves would hand 1F1B part of ZB-H1's gain and blur the comparison.
        backward_input(a, stats, /*send_now=*/false);
        backward_weight(a, stats);
        send_input_gradient(a);
        break;
      case ActionKind::kBackwardInput:
        backward_input(a, stats, /*send_now=*/true);
        break;
      case ActionKind::kBackwardWeight:
        backward_weight(a, stats);
        break;
    }
  }
  drain_gradient_sends();
  BRIGADE_CHECK(live_slots_ == 0) << live_slots_ << " slots alive after the step";
  stats.wall_s = seconds_since(start);
  stats.peak_bytes = pool_.peak_bytes();
  return stats;
}

}  // namespace brigade
