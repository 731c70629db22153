#include "brigade/sync/lowcomm/demo.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/sync/lowcomm/topk.h"

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

Demo::Demo(const DemoConfig& config, const ParamLayout& layout, int64_t begin, int64_t end)
    : config_(config), begin_(begin), end_(end) {
  config_.validate();
  std::vector<SparseGroupShape> groups;
  int max_chunk = 1;
  int64_t max_strip = 1;
  for (const ParamSpec* s : whole_tensors_in_range(layout, begin, end, "demo")) {
    const ChunkGeometry g = dct_geometry(s->shape, config_.max_chunk);
    const int k = std::min(config_.k, g.chunk_size());
    tensors_.push_back(TensorState{s->offset, s->weight_decay, k, std::make_unique<BlockDct>(g)});
    groups.push_back(SparseGroupShape{static_cast<uint32_t>(g.chunk_size()),
                                      static_cast<uint32_t>(g.num_chunks()),
                                      static_cast<uint32_t>(k)});
    max_chunk = std::max(max_chunk, g.chunk_size());
    max_strip = std::max(max_strip, g.s1 * g.n2);
  }
  format_ = SparsePayloadFormat(std::move(groups), config_.values);
  delta_.assign(static_cast<size_t>(end - begin), 0.0f);
  coeffs_.assign(max_chunk, 0.0f);
  sum_.assign(max_chunk, 0.0f);
  u_.assign(max_chunk, 0.0f);
  order_.assign(max_chunk, 0.0f);
  strip_.assign(2 * max_strip, 0.0f);  // forward_rows' output, then its work area
  idx_.assign(max_chunk, 0);
  touched_.assign(max_chunk, 0);
  val_.assign(max_chunk, 0.0f);
  count_.assign(max_chunk, 0);
  payload_.assign(format_.size_bytes(), 0);
}

void Demo::compress(const float* grads, float lr, uint8_t* payload) {
  const float beta = config_.beta;
  format_.begin(payload);
  for (size_t t = 0; t < tensors_.size(); ++t) {
    TensorState& ts = tensors_[t];
    BlockDct& dct = *ts.dct;
    const ChunkGeometry& g = dct.geometry();
    const int64_t numel = g.n1 * g.n2;
    float* d = delta_.data() + (ts.offset - begin_);
    const float* gr = grads + ts.offset;
    for (int64_t i = 0; i < numel; ++i) d[i] = beta * d[i] + lr * gr[i];
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
        format_.put_chunk(payload, static_cast<int>(t), rb * blocks2 + jb, idx_.data(),
                          val_.data());
        // The residual keeps what was not sent: delta -= IDCT(selected).
        float* block = rows + jb * g.s2;
        if (sparse) {
          dct.add_inverse_sparse(idx_.data(), val_.data(), ts.k, -1.0f, block, g.n2);
        } else {
          std::fill(coeffs_.begin(), coeffs_.begin() + cs, 0.0f);
          for (int j = 0; j < ts.k; ++j) coeffs_[idx_[j]] = val_[j];
          dct.inverse_block(coeffs_.data(), u_.data(), g.s2);
          for (int i = 0; i < g.s1; ++i) {
            for (int j = 0; j < g.s2; ++j) block[i * g.n2 + j] -= u_[i * g.s2 + j];
          }
        }
      }
    }
  }
}

void Demo::apply(const uint8_t* payloads, int world, float* params, float lr) {
  BRIGADE_CHECK(world >= 1) << "world " << world;
  const int64_t bytes = format_.size_bytes();
  for (int r = 0; r < world; ++r) {
    try {
      format_.validate(payloads + r * bytes, bytes);
    } catch (const PayloadError& e) {
      throw PayloadError(std::string("demo: from rank ") + std::to_string(r) + ": " + e.what());
    }
  }
  for (size_t t = 0; t < tensors_.size(); ++t) {
    TensorState& ts = tensors_[t];
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
        format_.get_chunk(payloads + r * bytes, static_cast<int>(t), c, idx_.data(), val_.data());
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
  const int64_t bytes = format_.size_bytes();
  compress(grads, lr, payload_.data());
  if (static_cast<int64_t>(gathered_.size()) < world * bytes) gathered_.resize(world * bytes);
  comm.all_gather_bytes(payload_.data(), gathered_.data(), bytes);
  apply(gathered_.data(), world, params, lr);
}

Traffic Demo::bytes_per_step(int world, int rank) const {
  return all_gather_equal_traffic(format_.size_bytes(), world, rank);
}

std::vector<StateView> Demo::state_tensors() {
  return {{"demo.delta", delta_.data(), begin_, end_}};
}

}  // namespace brigade
