#pragma once
// Float buffers for per-micro-batch activations and gradients, reused across micro-batches and
// steps so the executor's step loop does not allocate once the pool has grown to the schedule's
// peak. Counts live buffers and bytes and their peaks, which is how the executor measures
// activation memory.
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace brigade {

class BufferPool {
 public:
  // A buffer of exactly `floats` floats (contents undefined); nullptr for 0 floats.
  float* acquire(int64_t floats);
  // Gives back a buffer from acquire() (nullptr is ignored).
  void release(float* buffer);

  int64_t live_bytes() const { return live_bytes_; }
  int64_t peak_bytes() const { return peak_bytes_; }
  // Restarts the peak at the current live bytes.
  void reset_peak() { peak_bytes_ = live_bytes_; }

 private:
  std::map<int64_t, std::vector<float*>> free_;  // by size
  std::map<float*, int64_t> size_of_;            // every buffer ever handed out
  std::vector<std::unique_ptr<float[]>> storage_;
  int64_t live_bytes_ = 0;
  int64_t peak_bytes_ = 0;
};

}  // namespace brigade
