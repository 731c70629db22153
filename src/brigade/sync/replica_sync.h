#pragma once
// The DpStrategy (parallel/dp_strategy.h) of the low-communication methods: gradients stay on
// their replica (no all-reduce during backward) and step() runs the method's exchange
// (sync_method.h: DiLoCo, DeMo, PowerSGD, EF-signSGD, top-k EF). The trainer drives it exactly
// like DDP; what differs:
//
// Gradient norm. Each replica holds only its own gradient, so grad_sum_squares() all-reduces
// one float, the mean over replicas of ||g_r||^2: every replica sees the same value, takes the
// same non-finite decision (skip or stop) and clips with the same scale. The norm reported is
// the root mean square of the replicas' gradient norms (for DDP it is the norm of the mean).
//
// Checkpoints. Rank 0 writes, as for DDP. begin_save() gathers every replica's local state
// (sync_method.h) to rank 0 over send/recv; the returned Optimizer lists, as flat tensors:
// the optimizer state (rank 0's), the method's replicated state, rank 0's local state under its
// own name, and replica r's local state as "replica<r>.<name>" (DiLoCo adds "replica<r>.params",
// the local weights). Resuming needs the same method and number of replicas; the trainer checks
// that before reading (train/checkpointing.h) and refuses otherwise.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/model/model.h"
#include "brigade/parallel/dp_strategy.h"
#include "brigade/sync/sync_method.h"

namespace brigade {

class ReplicaSync : public DpStrategy {
 public:
  // dp: the data-parallel group (at least 2 ranks). The optimizer (train.optimizer over the whole
  // flat range) is created only when the method uses one.
  ReplicaSync(Communicator& dp, Model& model, const OptimizerConfig& optimizer_config,
              std::unique_ptr<SyncMethod> method);
  ~ReplicaSync() override;

  const SyncMethod& method() const { return *method_; }

  int zero_stage() const override { return 0; }
  Optimizer& optimizer() override;

  void start_step() override { model_.zero_grads(); }
  void before_backward(bool /*last_micro_step*/) override {}
  double finish_gradients() override { return 0.0; }
  // Collective: the mean over replicas of the local squared gradient norm.
  double grad_sum_squares() override;
  void scale_grads(float scale) override;
  void step(float lr, int64_t step) override;

  // Bytes of this rank's communication in one train step by formula: the norm all-reduce, plus
  // the method's exchange of update t when the update was applied.
  Traffic step_traffic(bool applied, int64_t t) const;
  // Collective, once after the last update t of the run: replicas that drift between syncs
  // (DiLoCo) sync one last time. Returns the bytes moved by formula.
  Traffic finish_training(int64_t t);

  Optimizer* begin_save() override;
  void end_save() override;
  Optimizer& load_target() override;
  void distribute_from_rank0(bool with_state) override;

 private:
  class Bundle;
  // This rank's state whose bits differ from other replicas', in a fixed order.
  std::vector<StateView> local_views();
  // State every replica holds identically (the parameters excluded).
  std::vector<StateView> replicated_views();
  // Rank 0: buffers for every other replica's local views, and the bundle listing everything.
  Bundle& make_bundle();

  Communicator& dp_;
  Model& model_;
  std::unique_ptr<Optimizer> optimizer_;  // null when the method does not use one
  std::unique_ptr<SyncMethod> method_;
  std::unique_ptr<Bundle> bundle_;  // rank 0, between begin_save/end_save or load/distribute
};

}  // namespace brigade
