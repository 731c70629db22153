#include "brigade/optim/trainable_mask.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>

#include "brigade/base/error.h"
#include "brigade/base/nearest_name.h"

namespace brigade {

namespace {

// 1234567 -> "1,234,567".
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

}  // namespace

bool freeze_pattern_matches(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0 ||
         ::fnmatch((pattern + ".*").c_str(), name.c_str(), 0) == 0;
}

bool is_frozen_name(const std::vector<std::string>& patterns, const std::string& name) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& p) { return freeze_pattern_matches(p, name); });
}

TrainableMask::TrainableMask(const ParamLayout& layout, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return;
  std::vector<FrozenRange> ranges;
  for (const ParamSpec& s : layout.specs()) {
    if (s.numel > 0 && is_frozen_name(patterns, s.name))
      ranges.push_back({s.offset, s.offset + s.numel});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const FrozenRange& a, const FrozenRange& b) { return a.begin < b.begin; });
  for (const FrozenRange& r : ranges) {
    if (!frozen_.empty() && frozen_.back().end >= r.begin) {
      frozen_.back().end = std::max(frozen_.back().end, r.end);
    } else {
      frozen_.push_back(r);
    }
  }
}

int64_t TrainableMask::frozen_count() const {
  int64_t n = 0;
  for (const FrozenRange& r : frozen_) n += r.end - r.begin;
  return n;
}

void TrainableMask::zero_frozen(float* grads, int64_t begin, int64_t end) const {
  for (const FrozenRange& r : frozen_) {
    const int64_t lo = std::max(begin, r.begin), hi = std::min(end, r.end);
    if (lo < hi) std::fill(grads + lo, grads + hi, 0.0f);
  }
}

std::vector<FrozenRange> TrainableMask::trainable_parts(int64_t begin, int64_t end) const {
  std::vector<FrozenRange> out;
  int64_t at = begin;
  for (const FrozenRange& r : frozen_) {
    if (r.end <= at) continue;
    if (r.begin >= end) break;
    if (r.begin > at) out.push_back({at, r.begin});
    at = std::max(at, r.end);
  }
  if (at < end) out.push_back({at, end});
  return out;
}

FreezeSummary check_freeze_patterns(const ParamLayout& layout,
                                    const std::vector<std::string>& patterns) {
  FreezeSummary s;
  for (const ParamSpec& spec : layout.specs()) {
    s.total_params += spec.numel;
    ++s.total_tensors;
    if (!is_frozen_name(patterns, spec.name)) continue;
    s.frozen_params += spec.numel;
    ++s.frozen_tensors;
  }
  for (const std::string& p : patterns) {
    const bool matched =
        std::any_of(layout.specs().begin(), layout.specs().end(),
                    [&](const ParamSpec& spec) { return freeze_pattern_matches(p, spec.name); });
    if (matched) continue;
    std::string names;
    const size_t shown = std::min<size_t>(layout.specs().size(), 6);
    for (size_t i = 0; i < shown; ++i) {
      names += (i ? ", " : "") + layout.specs()[i].name;
    }
    if (shown < layout.specs().size()) {
      names += fmt::format(", ... ({} tensors)", layout.specs().size());
    }
    std::vector<std::string> all;
    for (const ParamSpec& spec : layout.specs()) all.push_back(spec.name);
    const std::string near =
        p.size() > 64 ? "" : nearest_name(p, all, std::max<size_t>(2, p.size() / 4));
    throw ConfigError(fmt::format(
        "train.freeze: pattern \"{}\" matches no parameter of this model{} (an fnmatch glob "
        "over tensor names, or a module prefix such as \"wte\" or \"h.0\"; the model has {})",
        p, near.empty() ? "" : "; did you mean \"" + near + "\"?", names));
  }
  if (s.total_params > 0 && s.frozen_params == s.total_params) {
    throw ConfigError(fmt::format(
        "train.freeze: the patterns freeze every parameter ({} tensors); leave at least one "
        "trainable",
        s.total_tensors));
  }
  return s;
}

std::string describe_freeze(const FreezeSummary& s) {
  return fmt::format("train.freeze: {} of {} parameters frozen ({} tensor{}); {} trainable",
                     grouped(s.frozen_params), grouped(s.total_params), s.frozen_tensors,
                     s.frozen_tensors == 1 ? "" : "s", grouped(s.total_params - s.frozen_params));
}

}  // namespace brigade
