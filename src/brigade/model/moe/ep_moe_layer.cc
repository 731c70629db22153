#include "brigade/model/moe/ep_moe_layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"

namespace brigade {

namespace {

// Counts travel as f32 in the table: exact below 2^24.
constexpr double kMaxCount = 16777216.0;

bool is_count(float v, double max) {
  return v >= 0.0f && v <= max && v == std::floor(v);
}

}  // namespace

void validate_expert_parallel(const MoeConfig& config, int ep_size) {
  if (ep_size < 1) throw ConfigError("parallel.ep = " + std::to_string(ep_size) + ": must be >= 1");
  if (config.n_experts % ep_size != 0)
    throw ConfigError("model.n_experts = " + std::to_string(config.n_experts) +
                      " is not divisible by parallel.ep = " + std::to_string(ep_size) +
                      ": every ep rank holds n_experts / ep experts");
}

EpMoeLayer::EpMoeLayer(const MoeConfig& config, const MoeParams& params, Communicator& ep,
                       int64_t max_tokens, float expert_grad_scale)
    : config_(config),
      params_(params),
      ep_(ep),
      k_(ep.size()),
      rank_(ep.rank()),
      e_local_((config.validate(), validate_expert_parallel(config, ep.size()),
                config.n_experts / ep.size())),
      max_tokens_(max_tokens),
      // Worst case over the group: every rank sends every assignment here, unless the capacity
      // (largest for the largest group) bounds the local experts first.
      max_recv_rows_(config.dropless()
                         ? k_ * max_tokens * config.top_k
                         : std::min<int64_t>(k_ * max_tokens * config.top_k,
                                             e_local_ * config.capacity(k_ * max_tokens))),
      expert_grad_scale_(expert_grad_scale),
      router_(config, max_tokens),
      dispatch_(config, max_tokens),
      experts_(config.d_model, max_recv_rows_) {
  BRIGADE_CHECK(params.expert_begin == rank_ * e_local_ &&
                params.expert_end == (rank_ + 1) * e_local_)
      << "ep rank " << rank_ << " of " << k_ << " must hold experts [" << rank_ * e_local_ << ", "
      << (rank_ + 1) * e_local_ << "), params hold [" << params.expert_begin << ", "
      << params.expert_end << ")";
  BRIGADE_CHECK(max_tokens >= 0 && static_cast<double>(max_tokens) * config.top_k < kMaxCount)
      << "max_tokens " << max_tokens;
  BRIGADE_CHECK(expert_grad_scale > 0.0f && std::isfinite(expert_grad_scale))
      << "expert_grad_scale " << expert_grad_scale;
  const int64_t E = config.n_experts, K = config.top_k, C = config.d_model;
  const int64_t T = 1 + E * K + E;
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  table_.resize(sz(T));
  tables_.resize(sz(k_ * T));
  all_counts_.resize(sz(k_ * E * K));
  total_counts_.resize(sz(E * K));
  total_prob_sums_.resize(sz(E));
  load_fraction_.resize(sz(E));
  starts_.resize(sz(k_ * E * K));
  recv_rows_.resize(sz(k_ * e_local_));
  send_counts_.resize(sz(k_));
  recv_counts_.resize(sz(k_));
  expert_row_begin_.resize(sz(e_local_ + 1));
  dgate_.resize(sz(max_tokens * K));
  send_.resize(sz(max_tokens * K * C));
  y_rows_.resize(sz(max_tokens * K * C));
  for (auto* v : {&recv_, &expert_in_, &expert_out_, &ret_}) v->resize(sz(max_recv_rows_ * C));
  stats_.load.resize(sz(E));
  stats_.kept.resize(sz(E));
}

void EpMoeLayer::read_tables() {
  const int64_t E = config_.n_experts, K = config_.top_k;
  const int64_t T = 1 + E * K + E;
  std::fill(total_counts_.begin(), total_counts_.end(), 0);
  std::fill(total_prob_sums_.begin(), total_prob_sums_.end(), 0.0);
  n_total_ = 0;
  for (int q = 0; q < k_; ++q) {
    const float* t = tables_.data() + q * T;
    const auto bad = [&](const std::string& what) {
      return CommError(CommError::Kind::kOther, "moe routing table from ep rank " +
                                                    std::to_string(q) + " of group '" + ep_.name() +
                                                    "': " + what);
    };
    if (!is_count(t[0], static_cast<double>(max_tokens_)))
      throw bad("token count " + std::to_string(t[0]) + " is not an integer in [0, " +
                std::to_string(max_tokens_) + "] (every rank must use the same max_tokens)");
    const int64_t n = static_cast<int64_t>(t[0]);
    int64_t sum = 0;
    for (int64_t i = 0; i < E * K; ++i) {
      if (!is_count(t[1 + i], static_cast<double>(n))) throw bad("malformed assignment count");
      const int64_t c = static_cast<int64_t>(t[1 + i]);
      all_counts_[q * E * K + i] = c;
      total_counts_[i] += c;
      sum += c;
    }
    if (sum != n * K) throw bad("assignment counts do not add up to tokens * top_k");
    for (int64_t e = 0; e < E; ++e) {
      const float p = t[1 + E * K + e];
      if (!(p >= 0.0f && p <= static_cast<float>(n) * 1.001f + 1e-3f))
        throw bad("probability sum out of range");
      total_prob_sums_[e] += p;
    }
    n_total_ += n;
  }
}

void EpMoeLayer::plan_receive() {
  const int64_t E = config_.n_experts, K = config_.top_k, C = config_.d_model;
  for (int q = 0; q < k_; ++q)
    assignment_starts(all_counts_.data(), k_, q, E, static_cast<int>(K),
                      starts_.data() + q * E * K);
  for (int q = 0; q < k_; ++q) {
    int64_t rows = 0;
    for (int64_t j = 0; j < e_local_; ++j) {
      const int64_t e = rank_ * e_local_ + j;
      int64_t r = 0;
      for (int64_t s = 0; s < K; ++s) {
        const int64_t i = (q * E + e) * K + s;
        r += kept_assignments(all_counts_[i], starts_[i], capacity_);
      }
      recv_rows_[q * e_local_ + j] = r;
      rows += r;
    }
    recv_counts_[q] = rows * C;
  }
  expert_row_begin_[0] = 0;
  for (int64_t j = 0; j < e_local_; ++j) {
    int64_t r = 0;
    for (int q = 0; q < k_; ++q) r += recv_rows_[q * e_local_ + j];
    expert_row_begin_[j + 1] = expert_row_begin_[j] + r;
  }
  BRIGADE_CHECK(expert_row_begin_[e_local_] <= max_recv_rows_)
      << "ep rank " << rank_ << " receives " << expert_row_begin_[e_local_] << " rows, sized for "
      << max_recv_rows_;
}

// Received rows arrive per source rank q, each block ordered by local expert j; the experts
// want them per j, each block ordered by q.
void EpMoeLayer::to_expert_major(float* dst, const float* src) const {
  const int64_t C = config_.d_model;
  int64_t src_row = 0;
  for (int q = 0; q < k_; ++q) {
    for (int64_t j = 0; j < e_local_; ++j) {
      int64_t dst_row = expert_row_begin_[j];
      for (int p = 0; p < q; ++p) dst_row += recv_rows_[p * e_local_ + j];
      const int64_t n = recv_rows_[q * e_local_ + j];
      std::memcpy(dst + dst_row * C, src + src_row * C, sizeof(float) * n * C);
      src_row += n;
    }
  }
}

void EpMoeLayer::to_source_major(float* dst, const float* src) const {
  const int64_t C = config_.d_model;
  int64_t dst_row = 0;
  for (int q = 0; q < k_; ++q) {
    for (int64_t j = 0; j < e_local_; ++j) {
      int64_t src_row = expert_row_begin_[j];
      for (int p = 0; p < q; ++p) src_row += recv_rows_[p * e_local_ + j];
      const int64_t n = recv_rows_[q * e_local_ + j];
      std::memcpy(dst + dst_row * C, src + src_row * C, sizeof(float) * n * C);
      dst_row += n;
    }
  }
}

float EpMoeLayer::forward(float* out, const float* x, int64_t N, const float* params) {
  const int64_t E = config_.n_experts, K = config_.top_k;
  router_.forward(x, params + params_.router_w, N);

  table_[0] = static_cast<float>(N);
  for (int64_t i = 0; i < E * K; ++i) table_[1 + i] = static_cast<float>(router_.counts()[i]);
  for (int64_t e = 0; e < E; ++e)
    table_[1 + E * K + e] = static_cast<float>(router_.prob_sums()[e]);
  ep_.all_gather(table_.data(), tables_.data(), static_cast<int64_t>(table_.size()));
  read_tables();
  capacity_ = config_.capacity(n_total_);

  plan_receive();
  dispatch_.plan(router_.expert(), router_.gate(), N, starts_.data() + rank_ * E * K, capacity_);
  const int64_t* rb = dispatch_.row_begin();
  for (int p = 0; p < k_; ++p)
    send_counts_[p] = (rb[(p + 1) * e_local_] - rb[p * e_local_]) * config_.d_model;
  BRIGADE_CHECK(send_counts_[rank_] == recv_counts_[rank_])
      << "ep rank " << rank_ << " keeps " << send_counts_[rank_] << " floats for itself but "
      << "the group's tables say " << recv_counts_[rank_];

  dispatch_.gather(send_.data(), x);
  ep_.all_to_all_v(send_.data(), send_counts_, recv_.data(), recv_counts_);
  to_expert_major(expert_in_.data(), recv_.data());
  experts_.forward(expert_out_.data(), expert_in_.data(), expert_row_begin_.data(), params_.experts,
                   params);
  to_source_major(ret_.data(), expert_out_.data());
  ep_.all_to_all_v(ret_.data(), recv_counts_, y_rows_.data(), send_counts_);
  dispatch_.combine(out, y_rows_.data());

  summarize_routing(total_counts_.data(), total_prob_sums_.data(), E, static_cast<int>(K), n_total_,
                    capacity_, stats_, load_fraction_.data());
  return static_cast<float>(config_.aux_loss_coef * stats_.aux_loss);
}

void EpMoeLayer::backward(float* dx, const float* dout, const float* x, float loss_grad,
                          const float* params, float* grads) {
  // Output gradients, gate-weighted, go to the owners in the forward's send layout.
  dispatch_.combine_backward(dgate_.data(), send_.data(), dout, y_rows_.data());
  ep_.all_to_all_v(send_.data(), send_counts_, recv_.data(), recv_counts_);
  to_expert_major(expert_out_.data(), recv_.data());
  // The experts' weight gradients are linear in their output gradient: scale it, and undo the
  // scale on the input gradient they return (exact when the scale is a power of two).
  const int64_t n = expert_row_begin_[e_local_] * config_.d_model;
  if (expert_grad_scale_ != 1.0f)
    for (int64_t i = 0; i < n; ++i) expert_out_[i] *= expert_grad_scale_;
  experts_.backward(recv_.data(), expert_out_.data(), expert_in_.data(), expert_row_begin_.data(),
                    params_.experts, params, grads);
  if (expert_grad_scale_ != 1.0f)
    for (int64_t i = 0; i < n; ++i) recv_[i] /= expert_grad_scale_;
  to_source_major(ret_.data(), recv_.data());
  ep_.all_to_all_v(ret_.data(), recv_counts_, send_.data(), send_counts_);
  dispatch_.gather_backward(dx, send_.data());
  const float aux_grad = static_cast<float>(config_.aux_loss_coef * loss_grad);
  router_.backward(dx, grads + params_.router_w, x, params + params_.router_w, dgate_.data(),
                   aux_grad, load_fraction_.data(), n_total_);
}

}  // namespace brigade
