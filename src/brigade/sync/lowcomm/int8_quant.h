#pragma once
// int8 quantization of a dense f32 vector, INTELLECT-1 style, for DiLoCo's pseudo-gradient.
//
// The vector (n values) is cut into chunks of `chunk` values (the last may be shorter). Per
// chunk of m values: sigma = ||x|| / sqrt(max(m - 1, 1)), scale = 6 sigma / 256,
// q = clamp(round(x / scale) + 128, 0, 255) -- the bins span +-3 sigma, the tails clamp -- and
// a 256-entry table of bin means (the mean of the x that fell into each bin; an empty bin
// holds its centre (q - 128) * scale) travels with the chunk. Decoding maps q to table[q], so
// the clamped tails decode to their true mean instead of the bin edge, and a chunk of equal
// values (scale 0: every q = 128) decodes exactly.
//
// Wire format (little-endian):
//   [0, 4) magic "BLQ8"   [4] version 1   [5, 8) zero   [8, 16) n (u64)
//   [16, 20) chunk (u32)  [20, 24) number of chunks (u32)
//   per chunk: 256 f32 bin means, then m bytes of q
// size = 24 + ceil(n / chunk) * 1024 + n  (vs 4n for f32: ~4x smaller for chunk >> 256).
#include <cstdint>

namespace brigade {

class Int8Codec {
 public:
  // n >= 0 values in chunks of `chunk` (1 .. 2^32 - 1) values.
  Int8Codec(int64_t n, int64_t chunk);

  int64_t n() const { return n_; }
  int64_t chunk() const { return chunk_; }
  int64_t num_chunks() const { return (n_ + chunk_ - 1) / chunk_; }
  // Exact payload size: 24 + num_chunks() * 1024 + n.
  int64_t size_bytes() const;

  // Writes the payload of x (n values) to out (size_bytes()). No allocation.
  void encode(const float* x, uint8_t* out) const;
  // Checks that data (size bytes) is a payload of exactly this n and chunk. Throws PayloadError.
  void validate(const uint8_t* data, int64_t size) const;
  // out[i] = decoded value i of a validated payload.
  void decode(const uint8_t* data, float* out) const;
  // out[i] += decoded value i (sums several replicas' payloads in a fixed order).
  void decode_add(const uint8_t* data, float* out) const;

 private:
  int64_t n_;
  int64_t chunk_;
};

}  // namespace brigade
