#include "brigade/model/flat_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <utility>

#include "brigade/base/check.h"

namespace brigade {

namespace {

int64_t page_bytes() {
  static const int64_t bytes = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

int64_t whole_pages_bytes(int64_t floats) {
  const int64_t bytes = floats * static_cast<int64_t>(sizeof(float));
  return (bytes + page_bytes() - 1) / page_bytes() * page_bytes();
}

}  // namespace

int64_t FlatBuffer::page_floats() {
  return page_bytes() / static_cast<int64_t>(sizeof(float));
}

FlatBuffer::FlatBuffer(int64_t n) {
  resize(n);
}

FlatBuffer::~FlatBuffer() {
  if (mapped_bytes_ > 0) munmap(data_, static_cast<size_t>(mapped_bytes_));
}

FlatBuffer::FlatBuffer(FlatBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

FlatBuffer& FlatBuffer::operator=(FlatBuffer&& other) noexcept {
  if (this != &other) {
    if (mapped_bytes_ > 0) munmap(data_, static_cast<size_t>(mapped_bytes_));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

void FlatBuffer::resize(int64_t n) {
  BRIGADE_CHECK(n >= 0) << "FlatBuffer size " << n;
  const int64_t bytes = whole_pages_bytes(n);
  if (n < size_) std::fill(data_ + n, data_ + size_, 0.0f);  // a later grow must read zeros
  if (bytes != mapped_bytes_) {
    void* p = nullptr;
    if (mapped_bytes_ == 0) {
      p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    } else if (bytes == 0) {
      munmap(data_, static_cast<size_t>(mapped_bytes_));
      p = nullptr;
    } else {
      p = mremap(data_, static_cast<size_t>(mapped_bytes_), static_cast<size_t>(bytes),
                 MREMAP_MAYMOVE);
    }
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<float*>(p);
    mapped_bytes_ = bytes;
  }
  size_ = n;
}

int64_t FlatBuffer::release(int64_t begin, int64_t end) {
  BRIGADE_CHECK(0 <= begin && begin <= end && end <= size_)
      << "release [" << begin << ", " << end << ") of " << size_;
  const int64_t pf = page_floats();
  const int64_t first = (begin + pf - 1) / pf * pf;  // first whole page inside the range
  const int64_t last = end / pf * pf;                // end of the last whole page
  if (first >= last) return 0;
  const int rc =
      madvise(data_ + first, static_cast<size_t>((last - first) * sizeof(float)), MADV_DONTNEED);
  BRIGADE_CHECK(rc == 0) << "madvise(MADV_DONTNEED) failed on [" << first << ", " << last << ")";
  return last - first;
}

void FlatBuffer::zero(int64_t begin, int64_t end) {
  BRIGADE_CHECK(0 <= begin && begin <= end && end <= size_)
      << "zero [" << begin << ", " << end << ") of " << size_;
  const int64_t pf = page_floats();
  const int64_t first = std::min(end, (begin + pf - 1) / pf * pf);
  const int64_t last = std::max(first, end / pf * pf);
  std::fill(data_ + begin, data_ + first, 0.0f);
  release(first, last);
  std::fill(data_ + last, data_ + end, 0.0f);
}

}  // namespace brigade
