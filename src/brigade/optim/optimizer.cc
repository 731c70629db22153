#include "brigade/optim/optimizer.h"

#include <cmath>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/optim/adamw.h"
#include "brigade/optim/sgd.h"
#include "brigade/optim/trainable_mask.h"

namespace brigade {

namespace {

void require(bool ok, const std::string& key, float value, const char* allowed) {
  if (!ok)
    throw ConfigError("optimizer." + key + " = " + std::to_string(value) + ": must be " + allowed);
}

}  // namespace

void OptimizerConfig::validate() const {
  if (name != "adamw" && name != "sgd")
    throw ConfigError("optimizer.name = \"" + name + "\": must be \"adamw\" or \"sgd\"");
  require(beta1 >= 0.0f && beta1 < 1.0f, "beta1", beta1, "in [0, 1)");
  require(beta2 >= 0.0f && beta2 < 1.0f, "beta2", beta2, "in [0, 1)");
  require(eps > 0.0f && std::isfinite(eps), "eps", eps, "> 0");
  require(weight_decay >= 0.0f && std::isfinite(weight_decay), "weight_decay", weight_decay,
          ">= 0");
  require(momentum >= 0.0f && momentum < 1.0f, "momentum", momentum, "in [0, 1)");
  if (name == "sgd" && nesterov && momentum == 0.0f)
    throw ConfigError("optimizer.nesterov = true: needs optimizer.momentum > 0");
}

Optimizer::Optimizer(const ParamLayout& layout, int64_t begin, int64_t end,
                     const std::vector<std::string>& freeze)
    : begin_(begin), end_(end) {
  BRIGADE_CHECK(0 <= begin && begin <= end && end <= layout.total())
      << "range [" << begin << ", " << end << ") outside [0, " << layout.total() << ")";
  for (const ParamSpec& spec : layout.specs()) {
    const int64_t lo = std::max(begin, spec.offset);
    const int64_t hi = std::min(end, spec.offset + spec.numel);
    if (lo >= hi) continue;
    const bool frozen = is_frozen_name(freeze, spec.name);
    if (!segments_.empty() && segments_.back().decay == spec.weight_decay &&
        segments_.back().frozen == frozen && segments_.back().end == lo) {
      segments_.back().end = hi;  // merge neighbours with the same flags
    } else {
      segments_.push_back({lo, hi, spec.weight_decay, frozen});
    }
  }
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, const ParamLayout& layout,
                                          int64_t begin, int64_t end) {
  config.validate();
  if (config.name == "adamw")
    return std::make_unique<AdamW>(AdamWConfig{.beta1 = config.beta1,
                                               .beta2 = config.beta2,
                                               .eps = config.eps,
                                               .weight_decay = config.weight_decay},
                                   layout, begin, end, config.freeze);
  return std::make_unique<Sgd>(SgdConfig{.momentum = config.momentum,
                                         .nesterov = config.nesterov,
                                         .weight_decay = config.weight_decay},
                               layout, begin, end, config.freeze);
}

}  // namespace brigade
