#pragma once
// Key material that wipes itself (sodium_memzero) when it goes: the secure-aggregation secrets
// (X25519 secret keys, self-mask seeds, pairwise seeds, Shamir shares) live only in these, so a
// round's secrets do not outlive its objects in freed memory.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace brigade::secagg {

// Overwrites bytes with zeros in a way the compiler may not elide.
void wipe_bytes(void* data, size_t size);

template <size_t N>
class Secret {
 public:
  Secret() = default;
  Secret(const Secret&) = default;
  Secret& operator=(const Secret&) = default;
  ~Secret() { wipe(); }

  uint8_t* data() { return bytes_.data(); }
  const uint8_t* data() const { return bytes_.data(); }
  static constexpr size_t size() { return N; }
  void wipe() { wipe_bytes(bytes_.data(), N); }

 private:
  std::array<uint8_t, N> bytes_{};
};

// A byte buffer of run-time size, wiped when resized away or destroyed.
class SecretBuffer {
 public:
  explicit SecretBuffer(size_t size) : bytes_(size) {}
  SecretBuffer(const SecretBuffer&) = delete;
  SecretBuffer& operator=(const SecretBuffer&) = delete;
  ~SecretBuffer() { wipe_bytes(bytes_.data(), bytes_.size()); }

  uint8_t* data() { return bytes_.data(); }
  const uint8_t* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

using SecretKey = Secret<32>;  // an X25519 secret key
using Seed = Secret<32>;       // a PRG seed: a self-mask seed b_u or a pairwise seed s_uv

}  // namespace brigade::secagg
