#pragma once
// A contiguous range [begin, end) of a flat parameter (or state) buffer.
#include <cstdint>

namespace brigade {

struct FlatRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const FlatRange&) const = default;
};

}  // namespace brigade
