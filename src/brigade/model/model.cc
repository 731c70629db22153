#include "brigade/model/model.h"

#include <algorithm>

#include "brigade/base/check.h"

namespace brigade {

void Model::pad_flat_buffers(int64_t padded) {
  BRIGADE_CHECK(padded >= layout_.total()) << "padding " << padded << " < " << layout_.total();
  params_.resize(padded);
  grads_.resize(padded);
}

}  // namespace brigade
