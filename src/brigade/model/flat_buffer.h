#pragma once
// The storage behind a model's flat parameter and gradient buffers: page-aligned anonymous
// memory (mmap) instead of a std::vector, so that sharded data parallelism (ZeRO-2/3) can hand
// the pages of the ranges a rank does not own back to the operating system between uses
// (madvise(MADV_DONTNEED)): resident memory then follows what the rank really holds, not the
// full model size. A fresh or released page reads as zeros and costs nothing until written.
#include <cstdint>

namespace brigade {

class FlatBuffer {
 public:
  // Floats per memory page (the granularity of release()).
  static int64_t page_floats();

  FlatBuffer() = default;
  // n floats, all zero; no page is resident until it is written. Throws std::bad_alloc.
  explicit FlatBuffer(int64_t n);
  ~FlatBuffer();
  FlatBuffer(FlatBuffer&& other) noexcept;
  FlatBuffer& operator=(FlatBuffer&& other) noexcept;
  FlatBuffer(const FlatBuffer&) = delete;
  FlatBuffer& operator=(const FlatBuffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  int64_t size() const { return size_; }

  // Grows or shrinks to n floats keeping the first min(n, size()) values; new elements are
  // zero. Pages are moved, not copied (mremap), so untouched pages stay non-resident.
  void resize(int64_t n);

  // Returns to the OS every page lying wholly inside [begin, end) (element offsets); those
  // elements read as zero afterwards. Elements on pages shared with the outside of the range
  // keep their values. Returns the number of floats released.
  int64_t release(int64_t begin, int64_t end);

  // Zeroes [begin, end): whole pages are released, the partial pages at the edges filled.
  void zero(int64_t begin, int64_t end);

 private:
  float* data_ = nullptr;
  int64_t size_ = 0;
  int64_t mapped_bytes_ = 0;  // whole pages; 0 when nothing is mapped
};

}  // namespace brigade
