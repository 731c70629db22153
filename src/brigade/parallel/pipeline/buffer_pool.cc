#include "brigade/parallel/pipeline/buffer_pool.h"

#include <algorithm>

#include "brigade/base/check.h"

namespace brigade {

float* BufferPool::acquire(int64_t floats) {
  BRIGADE_CHECK(floats >= 0) << "buffer of " << floats << " floats";
  if (floats == 0) return nullptr;
  float* buffer = nullptr;
  auto& list = free_[floats];
  if (!list.empty()) {
    buffer = list.back();
    list.pop_back();
  } else {
    storage_.push_back(std::make_unique<float[]>(static_cast<size_t>(floats)));
    buffer = storage_.back().get();
    size_of_[buffer] = floats;
  }
  live_bytes_ += floats * static_cast<int64_t>(sizeof(float));
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return buffer;
}

void BufferPool::release(float* buffer) {
  if (buffer == nullptr) return;
  auto it = size_of_.find(buffer);
  BRIGADE_CHECK(it != size_of_.end()) << "release of a buffer the pool did not hand out";
  free_[it->second].push_back(buffer);
  live_bytes_ -= it->second * static_cast<int64_t>(sizeof(float));
  BRIGADE_CHECK(live_bytes_ >= 0) << "buffer released twice";
}

}  // namespace brigade
