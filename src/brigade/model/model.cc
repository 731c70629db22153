#include "brigade/model/model.h"

#include <algorithm>

namespace brigade {

void Model::zero_grads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void Model::allocate_params() {
  params_.assign(static_cast<size_t>(layout_.total()), 0.0f);
  grads_.assign(static_cast<size_t>(layout_.total()), 0.0f);
}

}  // namespace brigade
