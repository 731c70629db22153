#include "brigade/model/flat_params.h"

#include <algorithm>

namespace brigade {

void FlatParams::zero_grads() {
  std::fill(grads_.data(), grads_.data() + grads_.size(), 0.0f);
}

void FlatParams::allocate_params() {
  params_ = FlatBuffer(layout_.total());
  grads_ = FlatBuffer(layout_.total());
}

}  // namespace brigade
