#pragma once
// How data-parallel replicas agree on the next weights: the one object the training loop calls,
// whatever the strategy — DDP (parallel/ddp.h) or ZeRO stage 1, 2 or 3 (parallel/zero.h). One
// step, on every rank:
//
//   start_step()                                   zero this rank's gradients
//   for each micro-step j:  forward;  before_backward(j == last);  backward
//   finish_gradients()                             wait for gradient communication
//   norm = sqrt(grad_sum_squares())                global norm (collective when sharded)
//   scale_grads(clip)                              clip
//   step(lr, t)                                    update, and re-assemble replicated params
//
// The strategy owns the optimizer, created for the flat range this rank updates (everything for
// DDP, the rank's shard for ZeRO). Checkpoints always hold the full, unpadded flat layout
// (params by tensor name, optimizer state as one vector over [0, num_params)), whatever the
// strategy and the number of ranks, so any strategy resumes any other's checkpoint.
#include <cstdint>
#include <memory>

#include "brigade/comm/communicator.h"
#include "brigade/model/model.h"
#include "brigade/sync/optimizer.h"

namespace brigade {

struct DpOptions {
  int zero = 0;                       // 0: DDP; 1, 2, 3: ZeRO stage
  int64_t bucket_elems = 256 * 1024;  // gradient bucket (and all-gather chunk) size
  WireDtype wire = WireDtype::kF32;   // DDP / ZeRO-1 gradient payload (ZeRO-2/3: f32 only)
  // ZeRO-3: parameters gathered or in flight plus gradients being produced, in units of the
  // largest parameter group, beyond which a prefetch waits (parallel/sharded_params.h). 2: no
  // more than forward holds; infinity: prefetch on every hint, 3 groups at the backward peak.
  double gather_budget_groups = 2.0;
};

class DpStrategy {
 public:
  virtual ~DpStrategy() = default;

  virtual int zero_stage() const = 0;
  // This rank's optimizer; its state covers only [optimizer().begin(), optimizer().end()).
  virtual Optimizer& optimizer() = 0;

  virtual void start_step() = 0;
  virtual void before_backward(bool last_micro_step) = 0;
  // Returns the seconds this step spent waiting for communication that compute did not hide
  // (gradient reduction; under ZeRO-3 also the parameter gathers of forward and backward).
  virtual double finish_gradients() = 0;
  // The squared L2 norm of the whole averaged gradient (the same value on every rank).
  virtual double grad_sum_squares() = 0;
  virtual void scale_grads(float scale) = 0;
  // Updates this rank's range with the optimizer (step = 1-based update count); afterwards
  // every parameter is current (ZeRO-3: every parameter of the own shard).
  virtual void step(float lr, int64_t step) = 0;

  // ---- Checkpoints ----
  // Collective. Makes the full parameters (in model.params()) and the full optimizer state
  // available on rank 0 and returns there the optimizer holding that state (null on other
  // ranks). Valid until end_save(), which every rank calls.
  virtual Optimizer* begin_save() = 0;
  virtual void end_save() = 0;
  // Rank 0, before loading: the optimizer to read a checkpoint's full state into (DDP: its own;
  // ZeRO: a temporary one over the whole flat space, freed by distribute_from_rank0()).
  virtual Optimizer& load_target() = 0;
  // Collective. Every rank takes its parameters (and, with with_state, its optimizer state) from
  // what rank 0 holds: freshly initialised or loaded parameters, loaded state.
  virtual void distribute_from_rank0(bool with_state) = 0;

  // ---- Evaluation ----
  // Collective. Keeps every parameter readable until end_full_params() (ZeRO-3 gathers them),
  // so that ranks may run different numbers of forwards.
  virtual void begin_full_params() {}
  virtual void end_full_params() {}
};

// Creates the strategy options.zero selects, with an optimizer made from optimizer_config for
// this rank's range. dp is this rank's data-parallel group, or null for a single process (then
// every stage is plain local training). Throws ConfigError when the model cannot run the stage
// (ZeRO-3 needs a model that announces parameter groups) or the options do not fit it.
std::unique_ptr<DpStrategy> make_dp_strategy(Communicator* dp, Model& model,
                                             const OptimizerConfig& optimizer_config,
                                             const DpOptions& options);

}  // namespace brigade
