#pragma once
// What the training loop needs from a model: its flat parameter space, a forward pass that
// returns the loss of a micro-batch, and an explicit backward that accumulates gradients.
#include <cstdint>
#include <functional>
#include <vector>

#include "brigade/model/batch.h"
#include "brigade/model/param_spec.h"

namespace brigade {

class OpProfiler;  // monitor/op_profiler.h

// Called by backward when grads [offset, offset + count) are final for this backward pass,
// so data parallelism can start reducing them while earlier layers still compute.
using GradReadyHook = std::function<void(int64_t offset, int64_t count)>;

class Model {
 public:
  virtual ~Model() = default;

  const ParamLayout& layout() const { return layout_; }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  int64_t num_params() const { return layout_.total(); }

  void zero_grads();
  void initialize(uint64_t seed) { layout_.initialize(params_.data(), seed); }

  // The largest micro-batch the activation buffers were sized for.
  virtual int64_t max_batch() const = 0;

  // Runs forward on batch (batch.size <= max_batch()) and returns the mean loss over its
  // targets. Saves what backward needs.
  virtual float forward(const Batch& batch) = 0;

  // Backward of the last forward with d(loss)/d(mean loss) = loss_scale (1/grad_accum for
  // accumulation); accumulates into grads().
  virtual void backward(const Batch& batch, float loss_scale) = 0;

  // Number of floating-point operations of forward + backward for one example, for MFU.
  virtual double flops_per_example() const = 0;

  void set_grad_ready_hook(GradReadyHook hook) { grad_ready_ = std::move(hook); }

  // Times every kernel call of forward and backward into profiler (per op kind); null turns
  // timing off. The profiler must outlive the model or be detached first.
  void set_profiler(OpProfiler* profiler) { profiler_ = profiler; }

 protected:
  // Subclasses fill layout_ in their constructor, then call this.
  void allocate_params();
  void grad_ready(int64_t offset, int64_t count) {
    if (grad_ready_) grad_ready_(offset, count);
  }

  ParamLayout layout_;
  std::vector<float> params_;
  std::vector<float> grads_;
  GradReadyHook grad_ready_;
  OpProfiler* profiler_ = nullptr;  // not owned; null: no timing
};

}  // namespace brigade
