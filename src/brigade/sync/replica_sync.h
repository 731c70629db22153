#pragma once
// The DpStrategy (parallel/dp_strategy.h) of the low-communication methods: gradients stay on
// their replica (no all-reduce during backward) and step() runs the method's exchange
// (sync_method.h: DiLoCo, DeMo, PowerSGD, EF-signSGD, top-k EF). The trainer drives it exactly
// like DDP; what differs:
//
// Gradient norm. Each replica holds only its own gradient, so reduce_step_scalars() all-reduces
// two floats in one collective (one set of rounds, which is what a 50 ms link charges for):
// the mean loss and the mean over replicas of ||g_r||^2: every replica sees the same values,
// takes the same non-finite decision (skip or stop) and clips with the same scale. The norm
// reported is the root mean square of the replicas' gradient norms (for DDP it is the norm of
// the mean). When the method steps independently (DiLoCo with sync.quorum < 1) both stay
// local: a stalled replica must not stall the others' inner steps.
//
// Checkpoints (checkpoint_pieces()). State every replica holds identically — the parameters
// unless the method keeps them per replica, the optimizer state unless it is per replica, the
// method's replicated state — is declared by every rank and written once; replica r's local
// state (sync_method.h) is its own tensor "replica<r>.<name>", written by rank r (DiLoCo adds
// "replica<r>.params", the local weights; rank 0 then also declares its weights under the
// parameter names, so that export and generate find a model). A state vector that spans the
// parameters is saved per tensor ("adamw.m/<tensor>", "replica1.params/<tensor>"), as every
// layout saves optimizer state; any other vector as one 1-D tensor. Resuming needs the same method
// and number of replicas; the trainer checks that before reading and refuses otherwise.
//
// What is synced (SyncedParams) is a flat range with its layout, not a model: a whole model under
// data parallelism, one pipeline chunk's tensor-parallel shard under model parallelism (one
// ReplicaSync per chunk over the replicas of its (pp, tp) position). Tensor-parallel shards save
// as regions of the full tensors (parallel/tp_state_pieces.h), so a per-tensor state vector of a
// sharded replica lands where the unsharded replica's does.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/model/model.h"
#include "brigade/parallel/dp_strategy.h"
#include "brigade/sync/sync_method.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

// The flat parameters one ReplicaSync keeps in step with the other replicas.
struct SyncedParams {
  // The tensors of params and grads, offsets from 0; layout->total() floats are synced (a tied
  // copy that follows another rank's, pipeline/tied_embedding.h, is left out past the end).
  const ParamLayout* layout = nullptr;
  float* params = nullptr;
  float* grads = nullptr;
  // The whole model's layout (tp = 1, every stage): streaming DiLoCo cuts its fragments by its
  // tensors, so that a chunk syncs each tensor at the step the whole model would. null: layout.
  const ParamLayout* whole = nullptr;
  // Names state that belongs to no tensor (a compressor's own vectors), unique per chunk and
  // shard ("stage1.tp0."); "" for a whole model.
  std::string scope;

  static SyncedParams of(FlatParams& model) {
    return {.layout = &model.layout(), .params = model.params(), .grads = model.grads()};
  }
  int64_t size() const { return layout->total(); }
};

class ReplicaSync : public DpStrategy {
 public:
  // dp: the replicas' group (at least 2 ranks). The optimizer (train.optimizer over the whole
  // synced range) is created only when the method uses one.
  ReplicaSync(Communicator& dp, const SyncedParams& synced, const OptimizerConfig& optimizer_config,
              std::unique_ptr<SyncMethod> method);
  ~ReplicaSync() override;

  const SyncMethod& method() const { return *method_; }

  int zero_stage() const override { return 0; }
  Optimizer& optimizer() override;

  void start_step() override;
  void before_backward(bool /*last_micro_step*/) override {}
  double finish_gradients() override { return 0.0; }
  // Collective: the mean over replicas of the local squared gradient norm.
  double grad_sum_squares() override;
  // Collective unless method().independent_steps(): *loss (this replica's) becomes the mean
  // over replicas and the return value is grad_sum_squares()'s, by one all-reduce of 2 floats.
  double reduce_step_scalars(float* loss);
  void scale_grads(float scale) override;
  void step(float lr, int64_t step) override;

  // Bytes of this rank's communication in one train step by formula: reduce_step_scalars()'s
  // all-reduce, plus the method's exchange of update t when the update was applied.
  Traffic step_traffic(bool applied, int64_t t) const;
  // The method's exchange of update t alone (several chunks share one scalar all-reduce).
  Traffic exchange_traffic(int64_t t) const;
  // Collective, once after the last update t of the run: replicas that drift between syncs
  // (DiLoCo) sync one last time. Returns the bytes moved by formula.
  Traffic finish_training(int64_t t);

  std::vector<StatePiece> checkpoint_pieces() override;
  void after_restore(bool resumed) override;

 private:
  // This rank's state whose bits differ from other replicas', in a fixed order.
  std::vector<StateView> local_views();
  // State every replica holds identically (the parameters excluded).
  std::vector<StateView> replicated_views();

  Communicator& dp_;
  SyncedParams synced_;
  std::unique_ptr<Optimizer> optimizer_;  // null when the method does not use one
  std::unique_ptr<SyncMethod> method_;
};

}  // namespace brigade
