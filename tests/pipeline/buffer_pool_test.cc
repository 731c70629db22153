// The pool reuses buffers by size and counts live and peak bytes.
#include "brigade/parallel/pipeline/buffer_pool.h"

#include <gtest/gtest.h>

namespace brigade {
namespace {

TEST(BufferPool, ReusesBuffersAndTracksPeak) {
  BufferPool pool;
  EXPECT_EQ(pool.acquire(0), nullptr);
  float* a = pool.acquire(100);
  float* b = pool.acquire(50);
  EXPECT_EQ(pool.live_bytes(), 600);
  pool.release(a);
  EXPECT_EQ(pool.live_bytes(), 200);
  EXPECT_EQ(pool.peak_bytes(), 600);
  EXPECT_EQ(pool.acquire(100), a);  // same size: the released buffer comes back
  float* c = pool.acquire(100);     // a second one is new
  EXPECT_NE(c, a);
  EXPECT_EQ(pool.peak_bytes(), 1000);
  pool.release(a);
  pool.release(b);
  pool.release(c);
  pool.release(nullptr);
  EXPECT_EQ(pool.live_bytes(), 0);
  pool.reset_peak();
  EXPECT_EQ(pool.peak_bytes(), 0);
}

}  // namespace
}  // namespace brigade
