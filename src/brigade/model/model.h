#pragma once
// What the training loop needs from a model: its flat parameter space, a forward pass that
// returns the loss of a micro-batch, and an explicit backward that accumulates gradients.
#include <cstdint>
#include <functional>
#include <vector>

#include "brigade/model/batch.h"
#include "brigade/model/flat_buffer.h"
#include "brigade/model/flat_params.h"
#include "brigade/model/moe/moe_totals.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

class OpProfiler;  // monitor/op_profiler.h

// A layer group: a flat range [begin, end) whose parameters forward and backward read together
// (GPT: the embeddings, each block, ln_f). Groups are disjoint and listed in flat order.
struct ParamGroup {
  int64_t begin = 0;
  int64_t end = 0;
};

// Materialises parameter groups on demand, for strategies that keep only a shard of the
// parameters resident (ZeRO-3 / FSDP). A model that lists param_groups() calls, around every
// stretch of forward or backward that reads a group's parameters:
//   prefetch(next)   a hint: the group will be needed soon; start fetching it (no wait)
//   acquire(g)       returns once group g's parameters are in params() (fetching if needed)
//   release(g)       the model will not read group g again until its next acquire
// Calls may repeat (acquire of a resident group, release of a released one are no-ops).
class ParamGatherer {
 public:
  virtual ~ParamGatherer() = default;
  virtual void prefetch(int group) = 0;
  virtual void acquire(int group) = 0;
  virtual void release(int group) = 0;
};

// The flat parameter space (layout, params, grads, grad-ready hook) is FlatParams'; a Model adds
// the whole model's forward and backward on a batch.
class Model : public FlatParams {
 public:
  // Grows params and grads to padded >= num_params() elements (the tail stays zero and is never
  // read by forward or backward), so sharded data parallelism can cut equal shards.
  void pad_flat_buffers(int64_t padded);
  int64_t padded_size() const { return params_.size(); }
  // The buffers themselves, for strategies that release the pages of ranges they do not own.
  FlatBuffer& param_buffer() { return params_; }
  FlatBuffer& grad_buffer() { return grads_; }

  // The model's layer groups in flat order; empty for a model that does not announce its
  // parameter reads (it then needs all parameters resident).
  const std::vector<ParamGroup>& param_groups() const { return param_groups_; }
  // Installs (or with null removes) the gatherer that forward and backward call; the gatherer
  // must outlive the model or be removed first.
  void set_param_gatherer(ParamGatherer* gatherer) { gatherer_ = gatherer; }

  // The largest micro-batch the activation buffers were sized for.
  virtual int64_t max_batch() const = 0;

  // Runs forward on batch (batch.size <= max_batch()) and returns the mean loss over its
  // targets. Saves what backward needs.
  virtual float forward(const Batch& batch) = 0;

  // Backward of the last forward with d(loss)/d(mean loss) = loss_scale (1/grad_accum for
  // accumulation); accumulates into grads().
  virtual void backward(const Batch& batch, float loss_scale) = 0;

  // The part of the last forward's loss that is an auxiliary term (a mixture-of-experts
  // load-balancing loss), included in what forward returned; 0 for models without one.
  // Evaluation subtracts it to report the task loss.
  virtual double aux_loss() const { return 0.0; }

  // Mixture-of-experts routing statistics of the backward passes since the last call (then
  // reset), and of all backward passes so far; empty for models without experts.
  virtual MoeTotals take_moe_totals() { return {}; }
  virtual MoeTotals moe_run_totals() const { return {}; }

  // Examples of the last forward whose argmax logit equals their (valid) label, for the
  // accuracy of evaluation; 0 for models that are not classifiers.
  virtual int64_t correct_predictions() const { return 0; }

  // Number of floating-point operations of forward + backward for one example, for MFU.
  virtual double flops_per_example() const = 0;

  // Times every kernel call of forward and backward into profiler (per op kind); null turns
  // timing off. The profiler must outlive the model or be detached first.
  void set_profiler(OpProfiler* profiler) { profiler_ = profiler; }

 protected:
  // ParamGatherer calls; no-ops without a gatherer.
  void prefetch_params(int group) {
    if (gatherer_) gatherer_->prefetch(group);
  }
  void acquire_params(int group) {
    if (gatherer_) gatherer_->acquire(group);
  }
  void release_params(int group) {
    if (gatherer_) gatherer_->release(group);
  }

  std::vector<ParamGroup> param_groups_;  // subclasses that call the gatherer fill it
  ParamGatherer* gatherer_ = nullptr;     // not owned; null: every parameter is resident
  OpProfiler* profiler_ = nullptr;        // not owned; null: no timing
};

}  // namespace brigade
