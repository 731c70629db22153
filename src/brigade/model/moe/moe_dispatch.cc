#include "brigade/model/moe/moe_dispatch.h"

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/row_gather.h"
#include "brigade/model/moe/moe_capacity.h"

namespace brigade {

MoeDispatch::MoeDispatch(const MoeConfig& config, int64_t max_tokens)
    : C_(config.d_model), E_(config.n_experts), K_(config.top_k), max_tokens_(max_tokens) {
  config.validate();
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  const int64_t max_rows = max_tokens * K_;
  BRIGADE_CHECK(max_rows < (int64_t{1} << 31)) << "max_tokens " << max_tokens;
  row_of_.resize(sz(max_rows));
  row_token_.resize(sz(max_rows));
  row_slot_.resize(sz(max_rows));
  row_gate_.resize(sz(max_rows));
  row_dot_.resize(sz(max_rows));
  row_begin_.resize(sz(E_ + 1));
  next_.resize(sz(E_ * K_));
  seen_.resize(sz(E_ * K_));
  keep_.resize(sz(E_ * K_));
}

void MoeDispatch::plan(const int32_t* expert, const float* gate, int64_t N, const int64_t* start,
                       int64_t capacity) {
  BRIGADE_CHECK(N >= 0 && N <= max_tokens_)
      << "dispatch: " << N << " tokens, sized for " << max_tokens_;
  n_ = N;
  std::fill(seen_.begin(), seen_.end(), 0);
  for (int64_t i = 0; i < N * K_; ++i) ++seen_[expert[i] * K_ + i % K_];
  rows_ = 0;
  for (int64_t e = 0; e < E_; ++e) {
    row_begin_[e] = rows_;
    for (int s = 0; s < K_; ++s) {
      const int64_t es = e * K_ + s;
      keep_[es] = kept_assignments(seen_[es], start[es], capacity);
      next_[es] = rows_;
      rows_ += keep_[es];
    }
  }
  row_begin_[E_] = rows_;
  // A second pass in token order hands out the rows: a prefix of each (expert, slot) in token
  // order is what the priority keeps.
  std::fill(seen_.begin(), seen_.end(), 0);
  for (int64_t n = 0; n < N; ++n) {
    for (int s = 0; s < K_; ++s) {
      const int64_t es = expert[n * K_ + s] * K_ + s;
      int32_t row = -1;
      if (seen_[es]++ < keep_[es]) {
        row = static_cast<int32_t>(next_[es]++);
        row_token_[row] = static_cast<int32_t>(n);
        row_slot_[row] = s;
        row_gate_[row] = gate[n * K_ + s];
      }
      row_of_[n * K_ + s] = row;
    }
  }
}

void MoeDispatch::gather(float* buf, const float* x) const {
  gather_rows(buf, x, row_token_.data(), nullptr, rows_, C_);
}

void MoeDispatch::combine(float* out, const float* y) const {
  std::fill(out, out + n_ * C_, 0.0f);
  scatter_add_rows(out, y, row_token_.data(), row_gate_.data(), rows_, C_);
}

void MoeDispatch::combine_backward(float* dgate, float* dy, const float* dout, const float* y) {
  std::fill(dgate, dgate + n_ * K_, 0.0f);
  rows_dot(row_dot_.data(), dout, row_token_.data(), y, rows_, C_);
  for (int64_t i = 0; i < rows_; ++i) dgate[row_token_[i] * K_ + row_slot_[i]] = row_dot_[i];
  gather_rows(dy, dout, row_token_.data(), row_gate_.data(), rows_, C_);
}

void MoeDispatch::gather_backward(float* dx, const float* dbuf) const {
  scatter_add_rows(dx, dbuf, row_token_.data(), nullptr, rows_, C_);
}

}  // namespace brigade
