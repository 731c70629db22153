#pragma once
// train.freeze (docs/fine-tuning.md): which parameters training leaves exactly as they started.
// A pattern is an fnmatch(3) glob over the tensor names of a ParamLayout ("h.0.*", "*.bias");
// it also names a module, matching every tensor below it: "wte" matches "wte.weight", "h.0"
// matches "h.0.attn.c_attn.weight" but not "h.10.ln_1.weight". The mask of one layout is the
// sorted list of the flat ranges its frozen tensors occupy. Optimizers skip them (no update, no
// weight decay, their state untouched: optim/optimizer.h) and the strategies zero their
// gradients before the global norm, so the norm and clipping count trainable parameters only;
// DDP and ZeRO-1 do not even communicate them (parallel/grad_buckets.h).
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/tensor/param_spec.h"

namespace brigade {

struct FrozenRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// Whether pattern names the tensor `name`: fnmatch(pattern, name), or fnmatch(pattern + ".*",
// name) (the module pattern names). No flags: '*' matches dots too.
bool freeze_pattern_matches(const std::string& pattern, const std::string& name);

// Whether any of patterns names `name`.
bool is_frozen_name(const std::vector<std::string>& patterns, const std::string& name);

class TrainableMask {
 public:
  TrainableMask() = default;  // nothing frozen
  // The tensors of layout that patterns name, as flat ranges (neighbours merged).
  TrainableMask(const ParamLayout& layout, const std::vector<std::string>& patterns);

  bool empty() const { return frozen_.empty(); }
  const std::vector<FrozenRange>& frozen() const { return frozen_; }
  int64_t frozen_count() const;

  // grads[i] = 0 for every frozen i in [begin, end); grads is indexed by flat offset.
  void zero_frozen(float* grads, int64_t begin, int64_t end) const;
  // The parts of [begin, end) that are not frozen, in order.
  std::vector<FrozenRange> trainable_parts(int64_t begin, int64_t end) const;

 private:
  std::vector<FrozenRange> frozen_;  // sorted, disjoint, not adjacent
};

// What train.freeze does to a whole model (its tp = 1 layout).
struct FreezeSummary {
  int64_t frozen_params = 0;
  int64_t total_params = 0;
  int64_t frozen_tensors = 0;
  int64_t total_tensors = 0;
};

// Checks patterns against the whole model's layout and counts what they freeze. Throws
// ConfigError naming train.freeze and the pattern when a pattern matches no tensor (listing a
// few of the layout's names), or when the patterns freeze every parameter.
FreezeSummary check_freeze_patterns(const ParamLayout& layout,
                                    const std::vector<std::string>& patterns);

// "train.freeze: 1,234 of 5,678 parameters frozen (3 tensors); 4,444 trainable".
std::string describe_freeze(const FreezeSummary& summary);

}  // namespace brigade
