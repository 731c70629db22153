#pragma once
// The flat parameter space that a whole model (model.h) and a pipeline chunk (gpt_stage.h) both
// own: their tensors' layout (tensor/param_spec.h), and the parameters and gradients as two flat
// buffers laid out by it. It is all that data parallelism, the replica syncs, the optimizers and
// the checkpoints see of either, so a strategy written against it runs on both.
#include <cstdint>
#include <functional>

#include "brigade/model/flat_buffer.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

// Called by backward when grads [offset, offset + count) are final for this backward pass,
// so data parallelism can start reducing them while earlier layers still compute.
using GradReadyHook = std::function<void(int64_t offset, int64_t count)>;

class FlatParams {
 public:
  FlatParams() = default;
  FlatParams(FlatParams&&) = default;
  FlatParams& operator=(FlatParams&&) = default;
  virtual ~FlatParams() = default;

  const ParamLayout& layout() const { return layout_; }
  // params() and grads() hold num_params() elements (more, zero, after Model::pad_flat_buffers)
  // and start on a page boundary.
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  int64_t num_params() const { return layout_.total(); }

  // Backward accumulates (+=): zero once per step.
  void zero_grads();
  // Every tensor by its layout's rule, by name and element: a shard starts from the values the
  // whole model's tensor holds there.
  void initialize(uint64_t seed) { layout_.initialize(params_.data(), seed); }

  // The hook backward calls as ranges of grads() become final (null removes it).
  void set_grad_ready_hook(GradReadyHook hook) { grad_ready_ = std::move(hook); }

 protected:
  // Subclasses fill layout_ in their constructor, then call this. Page-aligned anonymous memory
  // rather than std::vector: pages are resident only once written, and sharded strategies can
  // release the ones they do not own (flat_buffer.h).
  void allocate_params();
  void grad_ready(int64_t offset, int64_t count) {
    if (grad_ready_) grad_ready_(offset, count);
  }

  ParamLayout layout_;
  FlatBuffer params_;
  FlatBuffer grads_;

 private:
  GradReadyHook grad_ready_;
};

}  // namespace brigade
