#pragma once
// Counts the heap allocations of this test binary while armed, to prove a hot loop allocates
// nothing: every operator new (the standard containers', oneDNN's included) and posix_memalign,
// through which oneDNN allocates its own objects (memory objects, primitives, buffers:
// dnnl::impl::malloc). Both are replaced for the whole binary, and the dynamic linker binds
// libdnnl's calls to these definitions, so include this header in exactly one source file of a
// test executable. Every form of operator new and delete that allocates unaligned memory is
// replaced, nothrow and array forms too, so that the other files of the executable (one per test
// folder and label) never pair a sanitizer's new with this file's delete.
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace brigade::testing {

inline std::atomic<bool> g_count_allocations{false};
inline std::atomic<int64_t> g_allocations{0};

// Counts from construction to destruction; count() reads it so far.
class CountedAllocations {
 public:
  CountedAllocations() {
    g_allocations = 0;
    g_count_allocations = true;
  }
  ~CountedAllocations() { g_count_allocations = false; }
  CountedAllocations(const CountedAllocations&) = delete;
  CountedAllocations& operator=(const CountedAllocations&) = delete;
  int64_t count() const { return g_allocations.load(); }
};

inline void count_allocation() {
  if (g_count_allocations.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
}

}  // namespace brigade::testing

// Replacing both halves is what the standard allows; GCC still pairs malloc'ed new with free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t n) {
  brigade::testing::count_allocation();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  brigade::testing::count_allocation();
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void* operator new[](size_t n) {
  return operator new(n);
}
void* operator new[](size_t n, const std::nothrow_t& tag) noexcept {
  return operator new(n, tag);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

extern "C" int posix_memalign(void** out, size_t alignment, size_t size) noexcept {
  brigade::testing::count_allocation();
  // aligned_alloc wants a multiple of the alignment; its memory is released by free().
  void* p = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
