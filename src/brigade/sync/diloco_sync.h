#pragma once
// DiLoCo as a SyncMethod: every step is an inner step of the run's optimizer on this replica's
// own gradient (no communication); after inner steps H, 2H, ... the outer step averages the
// pseudo-gradients and moves every replica to the new theta_global (lowcomm/diloco.h). With
// P > 1 fragments (streaming DiLoCo) fragment f syncs at steps (f + 1) H / P + m H instead, so
// each outer step moves 1/P of the model. The pseudo-gradient travels as f32, int8 or DCT top-k
// with error feedback (lowcomm/diloco.h); the last keeps a residual per replica (local state). At
// the end of training every fragment that did not just sync does so, so the final model is
// theta_global on every replica.
//
// Peers come and go (sync.quorum < 1): with a QuorumExchange the outer steps go through the
// store and average the replicas that reported before the deadline (lowcomm/quorum_exchange.h);
// a replica left out takes the members' theta_global and carries on. The exchange key is the
// update number t (unique per outer step), so the rounds line up by schedule, not by arrival.
#include <cstdint>
#include <memory>
#include <vector>

#include "brigade/sync/lowcomm/diloco.h"
#include "brigade/sync/sync_method.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

class DilocoSync : public SyncMethod {
 public:
  // Fragments are cut at tensor boundaries (fragment_range_aligned); empty ones never sync.
  // whole: the whole model's layout when layout is a pipeline chunk or a tp shard of it (tensors
  // named alike): fragments are cut there, so that each tensor syncs at the step it would in
  // the whole model, and a chunk's fragment f is its tensors of the model's fragment f.
  DilocoSync(const DilocoConfig& config, int64_t inner_steps, int fragments,
             const ParamLayout& layout, const float* params,
             std::unique_ptr<QuorumExchange> quorum = nullptr, const ParamLayout* whole = nullptr);
  ~DilocoSync() override;

  const char* name() const override { return "diloco"; }
  bool uses_optimizer() const override { return true; }
  bool local_params() const override { return true; }
  bool independent_steps() const override { return quorum_ != nullptr; }
  void step(float* params, float* grads, Optimizer* optimizer, float lr, int64_t t,
            Communicator& comm) override;
  Traffic traffic(int64_t t, int world, int rank) const override;
  void start(const float* params) override;
  Traffic finish(float* params, int64_t t, Communicator& comm) override;
  // "diloco.global", "diloco.momentum" (suffixed ".f<i>" per fragment when P > 1).
  std::vector<StateView> replicated_state() override;
  // "diloco.residual" (".f<i>" per fragment) with sync.payload = "dct_topk": the error feedback.
  std::vector<StateView> local_state() override;

 private:
  int fragment_at(int64_t t) const;
  void sync_fragment(int f, float* params, int64_t t, bool final, Communicator& comm);
  Traffic fragment_traffic(int f, int world, int rank) const;
  std::vector<StateView> fragment_state(bool local);

  int64_t inner_steps_;
  int num_fragments_;
  int64_t num_params_;
  std::vector<std::unique_ptr<DilocoOuter>> outers_;  // one per fragment
  std::unique_ptr<QuorumExchange> quorum_;            // null: outer steps are collectives
};

}  // namespace brigade
