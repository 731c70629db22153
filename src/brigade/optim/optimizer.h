#pragma once
// Optimizers over the flat parameter space. An optimizer is created for one range
// [begin, end) of the flat buffers (the whole model, or this rank's ZeRO shard) and owns its
// state (AdamW's m and v, SGD's momentum) as twin buffers of that range. Weight decay is per
// tensor (ParamSpec::weight_decay); since a range may cut through tensors, the range is split
// once, at construction, into segments along ParamSpec boundaries, so step() does no
// bookkeeping or allocation beyond walking them. Tensors named by OptimizerConfig::freeze
// (train.freeze, optim/trainable_mask.h) are segments step() skips: no update, no weight decay,
// and their part of the state buffers is never touched (zero in a run that froze them from the
// start; the buffers still span the whole range, so a checkpoint holds the same tensors whatever
// is frozen, and a later run may unfreeze them).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brigade/tensor/param_spec.h"

namespace brigade {

struct OptimizerConfig {
  std::string name = "adamw";  // "adamw" or "sgd"
  float beta1 = 0.9f;          // AdamW: first-moment decay, in [0, 1)
  float beta2 = 0.95f;         // AdamW: second-moment decay, in [0, 1)
  float eps = 1e-8f;           // AdamW: denominator guard, > 0
  float weight_decay = 0.1f;   // decoupled (AdamW) / L2 (SGD), only on decay tensors, >= 0
  float momentum = 0.9f;       // SGD: in [0, 1); 0 keeps no state
  bool nesterov = false;       // SGD: Nesterov momentum (needs momentum > 0)
  // train.freeze: globs of tensor names step() leaves as they are (optim/trainable_mask.h).
  std::vector<std::string> freeze = {};
  // Throws ConfigError naming the key ("optimizer.beta1"), the value and what is allowed.
  void validate() const;
};

// A named view of optimizer state covering the flat range [begin, end): data[i] belongs to
// flat element begin + i. Checkpoints save and restore through it.
struct StateView {
  std::string name;  // "adamw.m", "adamw.v", "sgd.momentum"
  float* data;
  int64_t begin;
  int64_t end;
  // Whether element i belongs to parameter begin + i (checkpoints save such a vector per tensor);
  // false for a vector of its own shape (PowerSGD's Q), begin = 0.
  bool per_param = true;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Updates params[i] for i in [begin, end), a sub-range of the range this optimizer was
  // created for, from grads[i]. params and grads are indexed by flat offset (element 0 of
  // the flat space at index 0). step is the 1-based count of updates (AdamW's bias correction).
  virtual void step(float* params, const float* grads, int64_t begin, int64_t end, float lr,
                    int64_t step) = 0;

  // Views of all state buffers, in a fixed order. Empty for stateless optimizers.
  virtual std::vector<StateView> state_tensors() = 0;

  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }

 protected:
  // A maximal run of [begin_, end_) whose elements share one weight-decay flag and are all
  // trainable or all frozen.
  struct Segment {
    int64_t begin, end;
    bool decay;
    bool frozen;
  };
  // freeze: globs of the tensors step() skips (OptimizerConfig::freeze).
  Optimizer(const ParamLayout& layout, int64_t begin, int64_t end,
            const std::vector<std::string>& freeze);

  // Calls fn(seg_begin, seg_end, decay) for each trainable piece of [begin, end) cut at
  // segment edges; frozen segments are skipped.
  template <typename Fn>
  void for_each_segment(int64_t begin, int64_t end, Fn&& fn) const;

  int64_t begin_, end_;
  std::vector<Segment> segments_;
};

// Creates the optimizer named by config.name for the flat range [begin, end) of layout.
// Throws ConfigError on an unknown name or invalid hyper-parameters.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, const ParamLayout& layout,
                                          int64_t begin, int64_t end);

template <typename Fn>
void Optimizer::for_each_segment(int64_t begin, int64_t end, Fn&& fn) const {
  // Segments are sorted and contiguous: skip those before begin, stop after end.
  for (const Segment& s : segments_) {
    if (s.end <= begin) continue;
    if (s.begin >= end) break;
    if (s.frozen) continue;
    fn(std::max(s.begin, begin), std::min(s.end, end), s.decay);
  }
}

}  // namespace brigade
