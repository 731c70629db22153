#include "brigade/model/param_spec.h"

#include <stdexcept>

#include "brigade/base/check.h"
#include "brigade/tensor/rng.h"

namespace brigade {

int64_t ParamLayout::add(ParamSpec spec) {
  BRIGADE_CHECK(find(spec.name) == nullptr) << "duplicate parameter " << spec.name;
  int64_t numel = 1;
  for (int64_t d : spec.shape) {
    BRIGADE_CHECK(d > 0) << spec.name << " has shape " << shape_string(spec.shape);
    numel *= d;
  }
  spec.numel = numel;
  spec.offset = total_;
  total_ += numel;
  specs_.push_back(std::move(spec));
  return specs_.back().offset;
}

const ParamSpec* ParamLayout::find(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

const ParamSpec& ParamLayout::at(const std::string& name) const {
  const ParamSpec* s = find(name);
  if (!s) throw std::out_of_range("no parameter named " + name);
  return *s;
}

void ParamLayout::initialize(float* params, uint64_t seed) const {
  for (const auto& s : specs_) {
    float* p = params + s.offset;
    switch (s.init) {
      case Init::kZeros:
        for (int64_t i = 0; i < s.numel; ++i) p[i] = 0.0f;
        break;
      case Init::kOnes:
        for (int64_t i = 0; i < s.numel; ++i) p[i] = 1.0f;
        break;
      case Init::kNormal:
        fill_normal(p, s.numel, 0.0f, s.init_std, seed, hash_name(s.name));
        break;
    }
  }
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + ")";
}

}  // namespace brigade
