// The arithmetic ZeRO rests on, checked element by element against a naive owner function, and
// the page release that makes sharded memory savings real (checked with mincore(2), which asks
// the kernel which pages are resident).
#include "brigade/parallel/zero_shard.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "brigade/model/flat_buffer.h"

namespace brigade {
namespace {

// Reference: element i (of the padded space) belongs to rank i / shard.
int naive_owner(int64_t i, int64_t shard) {
  return static_cast<int>(i / shard);
}

TEST(ShardLayout, ShardsAreEqualAlignedMinimalAndCoverTheModel) {
  for (int64_t total : {0, 1, 5, 7, 64, 1000, 1023, 1024, 1025, 34688, 100003}) {
    for (int world : {1, 2, 3, 4, 7}) {
      for (int64_t align : {1, 4, 1024}) {
        ShardLayout s(total, world, align);
        SCOPED_TRACE(testing::Message()
                     << "total " << total << " world " << world << " align " << align);
        EXPECT_EQ(s.shard() % align, 0);
        EXPECT_GE(s.padded(), total);
        // Minimal: one align step less would not hold the model.
        EXPECT_LT((s.shard() - align) * world, std::max<int64_t>(total, 1));
        EXPECT_EQ(s.padded(), s.shard() * world);
        int64_t owned_sum = 0;
        for (int r = 0; r < world; ++r) {
          FlatRange sh = s.shard_of(r), own = s.owned(r);
          EXPECT_EQ(sh.begin, r * s.shard());
          EXPECT_EQ(sh.size(), s.shard());
          // owned = the elements < total whose naive owner is r.
          int64_t count = 0, first = -1;
          for (int64_t i = 0; i < total; ++i) {
            if (naive_owner(i, s.shard()) != r) continue;
            if (first < 0) first = i;
            ++count;
          }
          EXPECT_EQ(own.size(), count);
          if (count > 0) {
            EXPECT_EQ(own.begin, first);
          }
          owned_sum += own.size();
        }
        EXPECT_EQ(owned_sum, total);
      }
    }
  }
}

TEST(ShardLayout, SplitCountsEachRanksPieceOfAnyRange) {
  const int64_t total = 1001;
  for (int world : {1, 2, 3, 4}) {
    ShardLayout s(total, world, 8);
    for (int64_t begin = 0; begin <= total; begin += 37) {
      for (int64_t end = begin; end <= total; end += 53) {
        std::vector<int64_t> want(world, 0);
        for (int64_t i = begin; i < end; ++i) ++want[naive_owner(i, s.shard())];
        EXPECT_EQ(s.split({begin, end}), want) << begin << " " << end;
        std::vector<int> owners;
        for (int r = 0; r < world; ++r) {
          if (want[r] > 0) owners.push_back(r);
        }
        EXPECT_EQ(s.owners({begin, end}), owners);
      }
    }
  }
}

TEST(ShardLayout, IntersectIsEmptyForDisjointRanges) {
  EXPECT_TRUE(intersect({0, 10}, {10, 20}).empty());
  EXPECT_TRUE(intersect({5, 6}, {0, 3}).empty());
  FlatRange r = intersect({0, 10}, {4, 20});
  EXPECT_EQ(r.begin, 4);
  EXPECT_EQ(r.end, 10);
}

TEST(AlignedBuckets, TileTheBufferBackwardsOnAlignedBoundaries) {
  for (int64_t total : {1, 999, 1024, 4096, 34688}) {
    for (int64_t bucket : {1, 100, 1024, 3000}) {
      const int64_t align = 256;
      const int64_t step = (bucket + align - 1) / align * align;
      auto buckets = plan_aligned_buckets(total, bucket, align);
      ASSERT_FALSE(buckets.empty());
      EXPECT_EQ(buckets.front().end, total);  // the end of the buffer finishes first
      EXPECT_EQ(buckets.back().begin, 0);
      for (size_t i = 0; i < buckets.size(); ++i) {
        EXPECT_EQ(buckets[i].begin % step, 0);
        EXPECT_GT(buckets[i].size(), 0);
        EXPECT_LE(buckets[i].size(), step);
        if (i > 0) {
          EXPECT_EQ(buckets[i].end, buckets[i - 1].begin);
        }
      }
    }
  }
  EXPECT_TRUE(plan_aligned_buckets(0, 10, 4).empty());
}

// Pages of [data, data + n) that the kernel reports resident.
int64_t resident_pages(const float* data, int64_t n) {
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t pages = (n * 4 + page - 1) / page;
  std::vector<unsigned char> v(static_cast<size_t>(pages));
  EXPECT_EQ(mincore(const_cast<float*>(data), static_cast<size_t>(pages * page), v.data()), 0);
  int64_t count = 0;
  for (unsigned char c : v) count += c & 1;
  return count;
}

TEST(FlatBuffer, ReleaseFreesWholePagesInsideTheRangeAndTheyReadAsZero) {
  const int64_t pf = FlatBuffer::page_floats();
  FlatBuffer buf(10 * pf + 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % (pf * 4), 0u);  // page-aligned
  EXPECT_EQ(resident_pages(buf.data(), buf.size()), 0);  // untouched pages cost nothing
  for (int64_t i = 0; i < buf.size(); ++i) buf.data()[i] = static_cast<float>(i + 1);
  EXPECT_EQ(resident_pages(buf.data(), buf.size()), 11);

  // [pf + 5, 6 pf + 2): pages 2..5 lie wholly inside; pages 1 and 6 are shared with outside.
  // (Residency is checked before reading: reading a released page maps the shared zero page,
  // which mincore reports as resident although it costs no memory.)
  EXPECT_EQ(buf.release(pf + 5, 6 * pf + 2), 4 * pf);
  EXPECT_EQ(resident_pages(buf.data(), buf.size()), 7);
  EXPECT_EQ(buf.release(3, pf - 1), 0);  // no whole page inside
  for (int64_t i = 0; i < buf.size(); ++i) {
    const bool freed = i >= 2 * pf && i < 6 * pf;
    ASSERT_EQ(buf.data()[i], freed ? 0.0f : static_cast<float>(i + 1)) << i;
  }

  for (int64_t i = 0; i < buf.size(); ++i) buf.data()[i] = static_cast<float>(i + 1);
  buf.zero(5, 9 * pf + 1);  // partial edges filled, whole pages released
  EXPECT_EQ(resident_pages(buf.data(), buf.size()), 3);  // pages 0, 9 and 10 remain
  for (int64_t i = 0; i < buf.size(); ++i) {
    const bool zeroed = i >= 5 && i < 9 * pf + 1;
    ASSERT_EQ(buf.data()[i], zeroed ? 0.0f : static_cast<float>(i + 1)) << i;
  }
}

TEST(FlatBuffer, ResizeKeepsValuesAndGrowsWithZeros) {
  FlatBuffer buf(100);
  for (int i = 0; i < 100; ++i) buf.data()[i] = static_cast<float>(i);
  buf.resize(5000);
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(buf.data()[i], i < 100 ? static_cast<float>(i) : 0.0f);
  buf.resize(50);
  buf.resize(200);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(buf.data()[i], i < 50 ? static_cast<float>(i) : 0.0f);
  FlatBuffer moved = std::move(buf);
  EXPECT_EQ(moved.size(), 200);
  EXPECT_EQ(buf.size(), 0);
  EXPECT_EQ(moved.data()[7], 7.0f);
}

}  // namespace
}  // namespace brigade
