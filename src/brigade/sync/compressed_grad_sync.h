#pragma once
// Compressed-gradient methods as SyncMethods: the compressor replaces DDP's all-reduce with an
// estimate of the replicas' mean gradient that every replica decodes identically, and the run's
// optimizer (train.optimizer) steps on that estimate. Parameters and optimizer state therefore
// stay identical across replicas; only the error-feedback residual is local.
//   PowerSgdSync  rank-r PowerSGD (lowcomm/powersgd.h); its warm-start Q is replicated state
//   SignEfSync    EF-signSGD, 1 bit per value + a scale per tensor (lowcomm/signef.h)
//   TopkEfSync    top-k with error feedback (lowcomm/topk_ef.h)
// The compressors run at scale 1 (the optimizer applies the learning rate).
#include <cstdint>
#include <vector>

#include "brigade/sync/lowcomm/powersgd.h"
#include "brigade/sync/lowcomm/signef.h"
#include "brigade/sync/lowcomm/topk_ef.h"
#include "brigade/sync/sync_method.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

class PowerSgdSync : public SyncMethod {
 public:
  PowerSgdSync(const PowerSgdConfig& config, const ParamLayout& layout)
      : psgd_(config, layout, 0, layout.total()), num_params_(layout.total()) {}

  const char* name() const override { return "powersgd"; }
  bool uses_optimizer() const override { return true; }
  void step(float* params, float* grads, Optimizer* optimizer, float lr, int64_t t,
            Communicator& comm) override;
  Traffic traffic(int64_t /*t*/, int world, int rank) const override {
    return psgd_.bytes_per_step(world, rank);
  }
  std::vector<StateView> replicated_state() override;  // "powersgd.q"
  std::vector<StateView> local_state() override { return psgd_.state_tensors(); }

 private:
  PowerSgd psgd_;
  int64_t num_params_;
};

class SignEfSync : public SyncMethod {
 public:
  explicit SignEfSync(const ParamLayout& layout)
      : signef_(layout, 0, layout.total()), update_(layout.total()) {}

  const char* name() const override { return "signef"; }
  bool uses_optimizer() const override { return true; }
  void step(float* params, float* grads, Optimizer* optimizer, float lr, int64_t t,
            Communicator& comm) override;
  Traffic traffic(int64_t /*t*/, int world, int rank) const override {
    return signef_.bytes_per_step(world, rank);
  }
  std::vector<StateView> local_state() override { return signef_.state_tensors(); }

 private:
  SignEf signef_;
  std::vector<float> update_;  // the decoded mean, indexed by flat offset
};

class TopkEfSync : public SyncMethod {
 public:
  TopkEfSync(const TopkEfConfig& config, int64_t num_params)
      : topk_(config, 0, num_params), update_(num_params) {}

  const char* name() const override { return "topk"; }
  bool uses_optimizer() const override { return true; }
  void step(float* params, float* grads, Optimizer* optimizer, float lr, int64_t t,
            Communicator& comm) override;
  Traffic traffic(int64_t /*t*/, int world, int rank) const override {
    return topk_.bytes_per_step(world, rank);
  }
  std::vector<StateView> local_state() override { return topk_.state_tensors(); }
  int64_t k() const { return topk_.k(); }

 private:
  TopkEf topk_;
  std::vector<float> update_;
};

}  // namespace brigade
