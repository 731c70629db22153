#include "brigade/tensor/param_spec.h"

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

int64_t ParamSpec::full_numel() const {
  if (!is_tp_shard()) return numel;
  int64_t n = 1;
  for (int64_t d : full_shape) n *= d;
  return n;
}

// Local element (row i, column j) of a shard. kDim0: row i lies in block i / piece (piece =
// shape[0] / parts rows per block on this rank) and maps to full row block * full_block +
// tp_rank * piece + i % piece; columns are whole. kDim1: the same on columns, rows whole.
int64_t ParamSpec::full_index(int64_t local) const {
  if (!is_tp_shard()) return local;
  const int64_t cols = shape.size() > 1 ? numel / shape[0] : 1;
  const int64_t full_cols = full_shape.size() > 1 ? full_numel() / full_shape[0] : 1;
  int64_t i = local / cols, j = local % cols;
  if (tp_split == TpSplit::kDim0) {
    const int64_t piece = shape[0] / tp_parts;
    const int64_t full_block = tp_parts == 1 ? piece * tp_size : full_shape[0] / tp_parts;
    i = (i / piece) * full_block + static_cast<int64_t>(tp_rank) * piece + i % piece;
    if (i >= full_shape[0]) return -1;  // vocab padding
  } else {
    const int64_t piece = cols / tp_parts;
    const int64_t full_block = full_cols / tp_parts;
    j = (j / piece) * full_block + static_cast<int64_t>(tp_rank) * piece + j % piece;
  }
  return i * full_cols + j;
}

namespace {

// Elements [first, first + n) of a random-initialised tensor's stream.
void fill_random(const ParamSpec& s, float* p, int64_t n, uint64_t seed, uint64_t first) {
  if (s.init == Init::kNormal) {
    fill_normal(p, n, 0.0f, s.init_std, seed, hash_name(s.name), first);
  } else {
    fill_uniform(p, n, -s.init_bound, s.init_bound, seed, hash_name(s.name), first);
  }
}

}  // namespace

void ParamLayout::initialize(float* params, uint64_t seed) const {
  for (const auto& s : specs_) {
    float* p = params + s.offset;
    switch (s.init) {
      case Init::kZeros:
        for (int64_t i = 0; i < s.numel; ++i) p[i] = 0.0f;
        break;
      case Init::kOnes:
        // Padding rows stay zero (they are never read by the loss).
        for (int64_t i = 0; i < s.numel; ++i) p[i] = s.full_index(i) < 0 ? 0.0f : 1.0f;
        break;
      case Init::kNormal:
      case Init::kUniform: {
        if (!s.is_tp_shard()) {
          fill_random(s, p, s.numel, seed, 0);
          break;
        }
        // Within a row of the shard the full indices are consecutive (only whole rows or
        // column pieces are cut), so fill piece by piece.
        const int64_t cols = s.shape.size() > 1 ? s.numel / s.shape[0] : 1;
        const int64_t run = s.tp_split == TpSplit::kDim1 ? cols / s.tp_parts : cols;
        for (int64_t i = 0; i < s.numel; i += run) {
          const int64_t f = s.full_index(i);
          if (f < 0) {
            for (int64_t k = 0; k < run; ++k) p[i + k] = 0.0f;
          } else {
            fill_random(s, p + i, run, seed, static_cast<uint64_t>(f));
          }
        }
        break;
      }
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

ParamLayout tensors_within(const ParamLayout& layout, int64_t begin, int64_t end) {
  ParamLayout out;
  for (const ParamSpec& s : layout.specs()) {
    if (s.offset >= begin && s.offset + s.numel <= end) out.add(s);
  }
  return out;
}

}  // namespace brigade
