#include "brigade/model/model.h"

#include <algorithm>

#include "brigade/base/check.h"

namespace brigade {

void Model::zero_grads() {
  std::fill(grads_.data(), grads_.data() + grads_.size(), 0.0f);
}

// Page-aligned anonymous memory rather than std::vector: pages are resident only once written,
// and sharded strategies can release the ones they do not own (model/flat_buffer.h).
void Model::allocate_params() {
  params_ = FlatBuffer(layout_.total());
  grads_ = FlatBuffer(layout_.total());
}

void Model::pad_flat_buffers(int64_t padded) {
  BRIGADE_CHECK(padded >= layout_.total()) << "padding " << padded << " < " << layout_.total();
  params_.resize(padded);
  grads_.resize(padded);
}

}  // namespace brigade
