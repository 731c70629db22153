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
// DDP, the rank's shard for ZeRO). Checkpoints always name the full, unpadded layout (params by
// tensor name, optimizer state as tensors of shape (num_params,)), whatever the strategy and the
// number of ranks; each rank saves and reads only its own pieces of them (checkpoint_pieces()),
// so any strategy resumes any other's checkpoint on any number of ranks.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brigade/ckpt/shard_plan.h"
#include "brigade/comm/communicator.h"
#include "brigade/model/model.h"
#include "brigade/optim/optimizer.h"

namespace brigade {

struct DpOptions {
  int zero = 0;                       // 0: DDP; 1, 2, 3: ZeRO stage
  int64_t bucket_elems = 256 * 1024;  // gradient bucket (and all-gather chunk) size
  WireDtype wire = WireDtype::kF32;   // DDP / ZeRO-1 gradient payload (ZeRO-2/3: f32 only)
  // ZeRO-3: parameters gathered or in flight plus gradients being produced, in units of the
  // largest parameter group, beyond which a prefetch waits (parallel/sharded_params.h). 2: no
  // more than forward holds; infinity: prefetch on every hint, 3 groups at the backward peak.
  double gather_budget_groups = 2.0;
  // DDP / ZeRO-1: reduce gradient buckets while backward runs (false: after it).
  bool overlap = true;
};

// One piece of a rank's training state in a sharded checkpoint, and where its elements live
// (f32, row-major in piece.region; valid as long as the strategy).
struct StatePiece {
  ShardPiece piece;
  float* data = nullptr;
};

// The part of each tensor of layout that lies in the flat range [begin, end), as a piece of the
// tensor prefix + name (whole when it is all there, else a flat range of it), whose elements
// are at data + (flat index - data_begin): the one way a flat buffer becomes checkpoint pieces.
std::vector<StatePiece> flat_range_pieces(const ParamLayout& layout, const std::string& prefix,
                                          float* data, int64_t data_begin, int64_t begin,
                                          int64_t end);
// Every parameter of model whole, under its name (replicated layouts).
std::vector<StatePiece> whole_param_pieces(FlatParams& model);
// The part of each parameter that lies in the flat range [begin, end), as a flat range of that
// parameter (ZeRO-3's own shard).
std::vector<StatePiece> param_range_pieces(FlatParams& model, int64_t begin, int64_t end);
// Each optimizer state buffer over [begin, end) (clipped to the optimizer's range; padding past
// the last tensor is in no tensor), per tensor: "<buffer>/<tensor>" ("adamw.m/wte.weight").
std::vector<StatePiece> optimizer_state_pieces(Optimizer& optimizer, const ParamLayout& layout,
                                               int64_t begin, int64_t end);

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
  // This rank's training state as pieces of the checkpoint's global tensors (ckpt/shard_plan.h),
  // each with the address of its elements: the same list on every call, the buffers the model
  // and optimizer own (no copy, no communication). A sharded checkpoint saves them (pieces
  // several ranks declare identically are written once) and a resume reads each piece back, so
  // any layout resumes any other's checkpoint.
  virtual std::vector<StatePiece> checkpoint_pieces() = 0;
  // Collective, once before training. resumed: every rank has read its pieces from a
  // checkpoint. Otherwise the parameters rank 0 initialised are copied to every rank.
  virtual void after_restore(bool resumed) = 0;
  // Collective, once before training, instead of after_restore: every rank has read the
  // parameters among its pieces from another run (train.init_from) and nothing else.
  virtual void after_initial_weights() { after_restore(false); }

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
