#pragma once
// DeMo's compressor as a codec over the whole tensors of a flat range, shared by DeMo (which
// sends its residual's strongest coefficients every step) and DiLoCo with a compressed
// pseudo-gradient (which sends those of Delta + residual once per outer step).
//
// encode(x): per tensor, per DCT chunk (dct.h), C = DCT(chunk of x); keep the top-k |C|
// (topk.h); write (index, value) into a sparse payload (payload.h); then x -= IDCT(kept), so x
// leaves as the error-feedback residual. Which "kept" is subtracted is the caller's choice:
//   Residual::kSelected  the unquantized coefficients (DeMo: the residual forgets what it chose,
//                        even when 1 bit of it went out);
//   Residual::kDecoded   exactly what a receiver decodes (DiLoCo: the residual is what was not
//                        sent, so the sum of everything sent plus the residual is the sum of
//                        every Delta).
//
// With values = 1bit and chunk_scales, a chunk's k signs are decoded as scale * sign, scale =
// mean |selected| of the chunk, and the payload ends with one f32 scale per chunk (DeMo needs
// no scale: it applies sign(u)). Wire: SparsePayloadFormat bytes, then (chunk_scales and 1bit
// only) 4 bytes per chunk, little-endian, in group then chunk order:
//   size = format().size_bytes() + (scaled ? 4 * total chunks : 0).
#include <cstdint>
#include <memory>
#include <vector>

#include "brigade/sync/lowcomm/dct.h"
#include "brigade/sync/lowcomm/payload.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

struct DctTopkConfig {
  int k = 32;          // coefficients kept per chunk, >= 1 (capped at each chunk's size)
  int max_chunk = 64;  // chunk edge limit for DeMo's divisor rule, 1..64
  ValueFormat values = ValueFormat::kBF16;
  bool chunk_scales = false;  // 1bit: decode as scale * sign with a per-chunk f32 scale
};

class DctTopkCodec {
 public:
  enum class Residual { kSelected, kDecoded };

  struct Tensor {
    int64_t offset;  // flat offset of the tensor
    bool decay;      // ParamSpec::weight_decay
    int k;           // entries per chunk
    std::unique_ptr<BlockDct> dct;
  };

  // [begin, end) of layout must consist of whole tensors (ConfigError naming `what` otherwise).
  DctTopkCodec(const DctTopkConfig& config, const ParamLayout& layout, int64_t begin, int64_t end,
               const char* what);

  int64_t size_bytes() const { return size_; }
  bool scaled() const { return scaled_; }
  const SparsePayloadFormat& format() const { return format_; }
  std::vector<Tensor>& tensors() { return tensors_; }

  // x holds end - begin values (indexed from begin) and leaves as the residual (see above);
  // payload gets size_bytes(). No allocation.
  void encode(float* x, uint8_t* payload, Residual residual);
  // Checks that data (size bytes) is a payload of exactly this codec: the sparse part
  // (indices in range, ascending) and every scale finite and >= 0. Throws PayloadError.
  void validate(const uint8_t* data, int64_t size) const;
  // out (end - begin values) += alpha * IDCT(decoded coefficients) of a validated payload.
  void decode_add(const uint8_t* data, float alpha, float* out);

  // Chunk c of tensor t of a validated payload: k indices and the values a receiver uses
  // (scale * sign when scaled). idx and val hold k entries.
  void get_chunk(const uint8_t* data, int t, int64_t c, uint32_t* idx, float* val) const;
  // Scratch for callers that decode chunk by chunk (one chunk of the largest size).
  int max_chunk_size() const { return max_chunk_; }

 private:
  DctTopkConfig config_;
  int64_t begin_;
  std::vector<Tensor> tensors_;
  std::vector<int64_t> first_chunk_;  // global chunk number of tensor t's chunk 0
  SparsePayloadFormat format_;
  bool scaled_ = false;
  int64_t size_ = 0;
  int max_chunk_ = 1;
  std::vector<float> coeffs_, u_, order_, strip_, val_, dec_;
  std::vector<uint32_t> idx_;
};

}  // namespace brigade
