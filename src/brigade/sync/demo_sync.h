#pragma once
// DeMo as a SyncMethod: each step folds the local gradient into this replica's residual delta,
// all-gathers the top-k DCT coefficients of every replica and applies p -= lr sign(u)
// (lowcomm/demo.h). The run's optimizer is not used: DeMo is the optimizer. delta differs
// between replicas and is local state; parameters stay identical.
#include <cstdint>
#include <vector>

#include "brigade/sync/lowcomm/demo.h"
#include "brigade/sync/sync_method.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

class DemoSync : public SyncMethod {
 public:
  DemoSync(const DemoConfig& config, const ParamLayout& layout)
      : demo_(config, layout, 0, layout.total()) {}

  const char* name() const override { return "demo"; }
  bool uses_optimizer() const override { return false; }
  void step(float* params, float* grads, Optimizer* /*optimizer*/, float lr, int64_t /*t*/,
            Communicator& comm) override {
    demo_.step(params, grads, lr, comm);
  }
  Traffic traffic(int64_t /*t*/, int world, int rank) const override {
    return demo_.bytes_per_step(world, rank);
  }
  std::vector<StateView> local_state() override { return demo_.state_tensors(); }

 private:
  Demo demo_;
};

}  // namespace brigade
