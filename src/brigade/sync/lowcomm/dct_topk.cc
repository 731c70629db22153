#include "brigade/sync/lowcomm/dct_topk.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "brigade/base/check.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/sync/lowcomm/topk.h"

namespace brigade {

DctTopkCodec::DctTopkCodec(const DctTopkConfig& config, const ParamLayout& layout, int64_t begin,
                           int64_t end, const char* what)
    : config_(config), begin_(begin) {
  BRIGADE_CHECK(config.k >= 1 && config.max_chunk >= 1 && config.max_chunk <= kMaxDctSize)
      << "k " << config.k << " max_chunk " << config.max_chunk;
  scaled_ = config.chunk_scales && config.values == ValueFormat::kSign;
  std::vector<SparseGroupShape> groups;
  int64_t max_strip = 1, chunks = 0;
  for (const ParamSpec* s : whole_tensors_in_range(layout, begin, end, what)) {
    const ChunkGeometry g = dct_geometry(s->shape, config.max_chunk);
    const int k = std::min(config.k, g.chunk_size());
    tensors_.push_back(Tensor{s->offset, s->weight_decay, k, std::make_unique<BlockDct>(g)});
    first_chunk_.push_back(chunks);
    chunks += g.num_chunks();
    groups.push_back(SparseGroupShape{static_cast<uint32_t>(g.chunk_size()),
                                      static_cast<uint32_t>(g.num_chunks()),
                                      static_cast<uint32_t>(k)});
    max_chunk_ = std::max(max_chunk_, g.chunk_size());
    max_strip = std::max(max_strip, g.s1 * g.n2);
  }
  format_ = SparsePayloadFormat(std::move(groups), config.values);
  size_ = format_.size_bytes() + (scaled_ ? 4 * chunks : 0);
  coeffs_.assign(max_chunk_, 0.0f);
  u_.assign(max_chunk_, 0.0f);
  order_.assign(max_chunk_, 0.0f);
  strip_.assign(2 * max_strip, 0.0f);  // forward_rows' output, then its work area
  val_.assign(max_chunk_, 0.0f);
  dec_.assign(max_chunk_, 0.0f);
  idx_.assign(max_chunk_, 0);
}

void DctTopkCodec::encode(float* x, uint8_t* payload, Residual residual) {
  format_.begin(payload);
  uint8_t* scales = payload + format_.size_bytes();
  for (size_t t = 0; t < tensors_.size(); ++t) {
    Tensor& ts = tensors_[t];
    BlockDct& dct = *ts.dct;
    const ChunkGeometry& g = dct.geometry();
    float* d = x + (ts.offset - begin_);
    const int cs = g.chunk_size();
    const bool sparse = ts.k < g.s1 + g.s2;
    const int64_t blocks2 = g.n2 / g.s2;
    for (int64_t rb = 0; rb < g.n1 / g.s1; ++rb) {
      float* rows = d + rb * g.s1 * g.n2;
      dct.forward_rows(rows, strip_.data(), strip_.data() + strip_.size() / 2);
      for (int64_t jb = 0; jb < blocks2; ++jb) {
        for (int i = 0; i < g.s1; ++i) {
          std::memcpy(coeffs_.data() + i * g.s2, strip_.data() + i * g.n2 + jb * g.s2,
                      sizeof(float) * g.s2);
        }
        topk_abs(coeffs_.data(), cs, ts.k, order_.data(), idx_.data(), val_.data());
        const int64_t c = rb * blocks2 + jb;
        format_.put_chunk(payload, static_cast<int>(t), c, idx_.data(), val_.data());
        float scale = 1.0f;
        if (scaled_) {
          double sum = 0.0;
          for (int j = 0; j < ts.k; ++j) sum += std::fabs(val_[j]);
          scale = static_cast<float>(sum / ts.k);
          if (!std::isfinite(scale)) scale = 0.0f;  // a NaN still goes out, as a sign
          detail::put_f32(scales + 4 * (first_chunk_[t] + c), scale);
        }
        // What leaves the residual: the selected values, or what receivers decode.
        const float* gone = val_.data();
        if (residual == Residual::kDecoded) {
          for (int j = 0; j < ts.k; ++j) {
            dec_[j] = scale * round_trip_value(format_.values(), val_[j]);
          }
          gone = dec_.data();
        }
        float* block = rows + jb * g.s2;
        if (sparse) {
          dct.add_inverse_sparse(idx_.data(), gone, ts.k, -1.0f, block, g.n2);
        } else {
          std::fill(coeffs_.begin(), coeffs_.begin() + cs, 0.0f);
          for (int j = 0; j < ts.k; ++j) coeffs_[idx_[j]] = gone[j];
          dct.inverse_block(coeffs_.data(), u_.data(), g.s2);
          for (int i = 0; i < g.s1; ++i) {
            for (int j = 0; j < g.s2; ++j) block[i * g.n2 + j] -= u_[i * g.s2 + j];
          }
        }
      }
    }
  }
}

void DctTopkCodec::validate(const uint8_t* data, int64_t size) const {
  if (size != size_) {
    throw PayloadError("dct top-k payload of " + std::to_string(size) + " bytes, expected " +
                       std::to_string(size_));
  }
  format_.validate(data, format_.size_bytes());
  if (!scaled_) return;
  const int64_t chunks = (size_ - format_.size_bytes()) / 4;
  const uint8_t* scales = data + format_.size_bytes();
  for (int64_t c = 0; c < chunks; ++c) {
    const float s = std::bit_cast<float>(detail::get_u32(scales + 4 * c));
    if (!(std::isfinite(s) && s >= 0.0f)) {
      throw PayloadError("dct top-k chunk scale " + std::to_string(c) + " = " + std::to_string(s) +
                         ": must be finite and >= 0");
    }
  }
}

void DctTopkCodec::get_chunk(const uint8_t* data, int t, int64_t c, uint32_t* idx,
                             float* val) const {
  format_.get_chunk(data, t, c, idx, val);
  if (!scaled_) return;
  const float s = std::bit_cast<float>(
      detail::get_u32(data + format_.size_bytes() + 4 * (first_chunk_[t] + c)));
  for (int j = 0; j < tensors_[t].k; ++j) val[j] *= s;
}

void DctTopkCodec::decode_add(const uint8_t* data, float alpha, float* out) {
  for (size_t t = 0; t < tensors_.size(); ++t) {
    Tensor& ts = tensors_[t];
    BlockDct& dct = *ts.dct;
    const ChunkGeometry& g = dct.geometry();
    float* o = out + (ts.offset - begin_);
    const int cs = g.chunk_size();
    for (int64_t c = 0; c < g.num_chunks(); ++c) {
      get_chunk(data, static_cast<int>(t), c, idx_.data(), val_.data());
      float* block = o + g.block_offset(c);
      if (ts.k < g.s1 + g.s2) {
        dct.add_inverse_sparse(idx_.data(), val_.data(), ts.k, alpha, block, g.n2);
      } else {
        std::fill(coeffs_.begin(), coeffs_.begin() + cs, 0.0f);
        for (int j = 0; j < ts.k; ++j) coeffs_[idx_[j]] = val_[j];
        dct.inverse_block(coeffs_.data(), u_.data(), g.s2);
        for (int i = 0; i < g.s1; ++i) {
          for (int j = 0; j < g.s2; ++j) block[i * g.n2 + j] += alpha * u_[i * g.s2 + j];
        }
      }
    }
  }
}

}  // namespace brigade
