#include "brigade/sync/lowcomm/demo.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/sync/lowcomm/common.h"

namespace brigade {

void DemoConfig::validate() const {
  if (!(beta >= 0.0f && beta < 1.0f)) {
    throw ConfigError("demo.beta = " + std::to_string(beta) + ": must be in [0, 1)");
  }
  if (k < 1) throw ConfigError("demo.k = " + std::to_string(k) + ": must be >= 1");
  if (max_chunk < 1 || max_chunk > kMaxDctSize) {
    throw ConfigError("demo.chunk = " + std::to_string(max_chunk) + ": must be in [1, 64]");
  }
  if (!(weight_decay >= 0.0f && std::isfinite(weight_decay))) {
    throw ConfigError("demo.weight_decay = " + std::to_string(weight_decay) + ": must be >= 0");
  }
}

namespace {
DctTopkConfig codec_config(const DemoConfig& c) {
  c.validate();
  return {.k = c.k, .max_chunk = c.max_chunk, .values = c.values, .chunk_scales = false};
}
}  // namespace

Demo::Demo(const DemoConfig& config, const ParamLayout& layout, int64_t begin, int64_t end)
    : config_(config),
      begin_(begin),
      end_(end),
      codec_(codec_config(config), layout, begin, end, "demo") {
  const int max_chunk = codec_.max_chunk_size();
  delta_.assign(static_cast<size_t>(end - begin), 0.0f);
  coeffs_.assign(max_chunk, 0.0f);
  sum_.assign(max_chunk, 0.0f);
  u_.assign(max_chunk, 0.0f);
  idx_.assign(max_chunk, 0);
  touched_.assign(max_chunk, 0);
  val_.assign(max_chunk, 0.0f);
  count_.assign(max_chunk, 0);
  payload_.assign(codec_.size_bytes(), 0);
}

void Demo::compress(const float* grads, float lr, uint8_t* payload) {
  const float beta = config_.beta;
  const float* g = grads + begin_;
  for (int64_t i = 0; i < end_ - begin_; ++i) delta_[i] = beta * delta_[i] + lr * g[i];
  // The residual forgets the selected coefficients unquantized (DeMo), even when 1 bit went out.
  codec_.encode(delta_.data(), payload, DctTopkCodec::Residual::kSelected);
}

void Demo::apply(const uint8_t* payloads, int world, float* params, float lr) {
  BRIGADE_CHECK(world >= 1) << "world " << world;
  const int64_t bytes = codec_.size_bytes();
  for (int r = 0; r < world; ++r) {
    try {
      codec_.validate(payloads + r * bytes, bytes);
    } catch (const PayloadError& e) {
      throw PayloadError(std::string("demo: from rank ") + std::to_string(r) + ": " + e.what());
    }
  }
  std::vector<DctTopkCodec::Tensor>& tensors = codec_.tensors();
  for (size_t t = 0; t < tensors.size(); ++t) {
    DctTopkCodec::Tensor& ts = tensors[t];
    BlockDct& dct = *ts.dct;
    const ChunkGeometry& g = dct.geometry();
    float* p = params + ts.offset;
    if (ts.decay && config_.weight_decay > 0.0f) {
      const float keep = 1.0f - lr * config_.weight_decay;
      for (int64_t i = 0; i < g.n1 * g.n2; ++i) p[i] *= keep;
    }
    const int cs = g.chunk_size();
    for (int64_t c = 0; c < g.num_chunks(); ++c) {
      // Per coefficient: mean over the replicas that picked it.
      int64_t n_touched = 0;
      for (int r = 0; r < world; ++r) {
        codec_.get_chunk(payloads + r * bytes, static_cast<int>(t), c, idx_.data(), val_.data());
        for (int j = 0; j < ts.k; ++j) {
          const uint32_t i = idx_[j];
          if (count_[i]++ == 0) touched_[n_touched++] = i;
          sum_[i] += val_[j];
        }
      }
      for (int64_t j = 0; j < n_touched; ++j) {
        const uint32_t i = touched_[j];
        val_[j] = sum_[i] / static_cast<float>(count_[i]);
        sum_[i] = 0.0f;
        count_[i] = 0;
      }
      if (n_touched < g.s1 + g.s2) {
        std::fill(u_.begin(), u_.begin() + cs, 0.0f);
        dct.add_inverse_sparse(touched_.data(), val_.data(), n_touched, 1.0f, u_.data(), g.s2);
      } else {
        std::fill(coeffs_.begin(), coeffs_.begin() + cs, 0.0f);
        for (int64_t j = 0; j < n_touched; ++j) coeffs_[touched_[j]] = val_[j];
        dct.inverse_block(coeffs_.data(), u_.data(), g.s2);
      }
      float* block = p + g.block_offset(c);
      for (int i = 0; i < g.s1; ++i) {
        for (int j = 0; j < g.s2; ++j) {
          const float u = u_[i * g.s2 + j];
          block[i * g.n2 + j] -= lr * static_cast<float>((u > 0.0f) - (u < 0.0f));
        }
      }
    }
  }
}

void Demo::step(float* params, const float* grads, float lr, Communicator& comm) {
  const int world = comm.size();
  const int64_t bytes = codec_.size_bytes();
  compress(grads, lr, payload_.data());
  if (static_cast<int64_t>(gathered_.size()) < world * bytes) gathered_.resize(world * bytes);
  comm.all_gather_bytes(payload_.data(), gathered_.data(), bytes);
  apply(gathered_.data(), world, params, lr);
}

Traffic Demo::bytes_per_step(int world, int rank) const {
  return all_gather_equal_traffic(codec_.size_bytes(), world, rank);
}

std::vector<StateView> Demo::state_tensors() {
  return {{"demo.delta", delta_.data(), begin_, end_}};
}

}  // namespace brigade
