#include "brigade/sync/lowcomm/diloco.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/sync/lowcomm/payload.h"

namespace brigade {

void DilocoConfig::validate() const {
  if (!(outer_lr > 0.0f && std::isfinite(outer_lr))) {
    throw ConfigError("diloco.outer_lr = " + std::to_string(outer_lr) + ": must be > 0");
  }
  if (!(momentum >= 0.0f && momentum < 1.0f)) {
    throw ConfigError("diloco.momentum = " + std::to_string(momentum) + ": must be in [0, 1)");
  }
  if (int8_chunk < 1 || int8_chunk > int64_t{0xffffffff}) {
    throw ConfigError("diloco.int8_chunk = " + std::to_string(int8_chunk) +
                      ": must be in [1, 2^32 - 1]");
  }
  if (wire == OuterWire::kDctTopk) {
    if (dct.k < 1) throw ConfigError("diloco.dct_k = " + std::to_string(dct.k) + ": must be >= 1");
    if (dct.max_chunk < 1 || dct.max_chunk > kMaxDctSize) {
      throw ConfigError("diloco.dct_chunk = " + std::to_string(dct.max_chunk) +
                        ": must be in [1, 64]");
    }
  }
  if (!(residual_decay > 0.0f && residual_decay <= 1.0f)) {
    throw ConfigError("diloco.residual_decay = " + std::to_string(residual_decay) +
                      ": must be in (0, 1]");
  }
  if (wire == OuterWire::kSign && sign_block < 8) {
    throw ConfigError("diloco.sign_block = " + std::to_string(sign_block) + ": must be >= 8");
  }
}

namespace {
const DilocoConfig& validated(const DilocoConfig& c, int64_t begin, int64_t end) {
  BRIGADE_CHECK(0 <= begin && begin <= end) << "range [" << begin << ", " << end << ")";
  c.validate();
  return c;
}
}  // namespace

DilocoOuter::~DilocoOuter() = default;

DilocoOuter::DilocoOuter(const DilocoConfig& config, const float* params, int64_t begin,
                         int64_t end, const ParamLayout* layout)
    : config_(validated(config, begin, end)),
      begin_(begin),
      end_(end),
      global_(params + begin, params + end),
      momentum_(config.momentum > 0.0f ? end - begin : 0, 0.0f),
      delta_(end - begin, 0.0f),
      codec_(end - begin, config.int8_chunk) {
  if (config_.wire == OuterWire::kInt8) payload_.resize(codec_.size_bytes());
  if (config_.wire == OuterWire::kDctTopk) {
    BRIGADE_CHECK(layout != nullptr) << "diloco dct_topk needs the parameter layout";
    DctTopkConfig c = config_.dct;
    c.chunk_scales = c.values == ValueFormat::kSign;
    dct_ = std::make_unique<DctTopkCodec>(c, *layout, begin, end, "diloco dct_topk");
    residual_.assign(end - begin, 0.0f);
    payload_.resize(dct_->size_bytes());
  }
  if (config_.wire == OuterWire::kSign) {
    BRIGADE_CHECK(layout != nullptr) << "diloco 1bit needs the parameter layout";
    sign_ = std::make_unique<SignAllReduce>(*layout, begin, end, config_.sign_block);
    payload_.resize(sign_->one_shard_bytes());
  }
  if (config_.wire == OuterWire::kPowerSgd) {
    BRIGADE_CHECK(layout != nullptr) << "diloco powersgd needs the parameter layout";
    powersgd_ = std::make_unique<PowerSgd>(config_.powersgd, *layout, begin, end);
    flat_.assign(end, 0.0f);
  }
}

const uint8_t* DilocoOuter::encode_delta() {
  const int64_t n = end_ - begin_;
  switch (config_.wire) {
    case OuterWire::kF32:
      return reinterpret_cast<const uint8_t*>(delta_.data());
    case OuterWire::kInt8:
      codec_.encode(delta_.data(), payload_.data());
      return payload_.data();
    case OuterWire::kDctTopk:
      // Error feedback: what earlier payloads left out rides along with this Delta.
      for (int64_t i = 0; i < n; ++i) {
        residual_[i] = config_.residual_decay * residual_[i] + delta_[i];
      }
      dct_->encode(residual_.data(), payload_.data(), DctTopkCodec::Residual::kDecoded);
      return payload_.data();
    case OuterWire::kSign:
      sign_->encode(delta_.data(), payload_.data());
      return payload_.data();
    case OuterWire::kPowerSgd:
      break;  // collectives only (outer_step(params, comm))
  }
  return nullptr;
}

void DilocoOuter::validate_payload(const uint8_t* p, int64_t bytes, int from) {
  try {
    if (config_.wire == OuterWire::kInt8) codec_.validate(p, bytes);
    if (config_.wire == OuterWire::kDctTopk) dct_->validate(p, bytes);
    if (config_.wire == OuterWire::kSign) sign_->validate(p, bytes, from);
  } catch (const PayloadError& e) {
    throw PayloadError("diloco: from rank " + std::to_string(from) + ": " + e.what());
  }
}

void DilocoOuter::decode_add(const uint8_t* p, float* sum) {
  switch (config_.wire) {
    case OuterWire::kF32: {
      const float* x = reinterpret_cast<const float*>(p);
      for (int64_t j = 0; j < end_ - begin_; ++j) sum[j] += x[j];
      break;
    }
    case OuterWire::kInt8:
      codec_.decode_add(p, sum);
      break;
    case OuterWire::kDctTopk:
      dct_->decode_add(p, 1.0f, sum);
      break;
    case OuterWire::kSign:
      sign_->decode_add(p, 1.0f, sum);
      break;
    case OuterWire::kPowerSgd:
      break;  // collectives only
  }
}

void DilocoOuter::pseudo_gradient(const float* params, float* delta) const {
  const float* local = params + begin_;
  for (int64_t i = 0; i < end_ - begin_; ++i) delta[i] = global_[i] - local[i];
}

void DilocoOuter::apply_mean(const float* mean_delta, float* params) {
  const int64_t n = end_ - begin_;
  const float lr = config_.outer_lr, mu = config_.momentum;
  if (momentum_.empty()) {
    for (int64_t i = 0; i < n; ++i) global_[i] -= lr * mean_delta[i];
  } else if (config_.nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      momentum_[i] = mu * momentum_[i] + mean_delta[i];
      global_[i] -= lr * (mean_delta[i] + mu * momentum_[i]);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      momentum_[i] = mu * momentum_[i] + mean_delta[i];
      global_[i] -= lr * momentum_[i];
    }
  }
  std::memcpy(params + begin_, global_.data(), sizeof(float) * n);
}

void DilocoOuter::outer_step(float* params, Communicator& comm) {
  const int64_t n = end_ - begin_;
  pseudo_gradient(params, delta_.data());
  if (config_.wire == OuterWire::kF32) {
    comm.all_reduce(delta_.data(), n, ReduceOp::kAvg);
  } else if (config_.wire == OuterWire::kSign) {
    sign_->all_reduce_mean(delta_.data(), comm);
  } else if (config_.wire == OuterWire::kPowerSgd) {
    std::memcpy(flat_.data() + begin_, delta_.data(), sizeof(float) * n);
    powersgd_->reduce(flat_.data(), comm);
    std::memcpy(delta_.data(), flat_.data() + begin_, sizeof(float) * n);
  } else {
    const int world = comm.size();
    const int64_t bytes = payload_bytes();
    const uint8_t* mine = encode_delta();
    if (static_cast<int64_t>(gathered_.size()) < world * bytes) gathered_.resize(world * bytes);
    comm.all_gather_bytes(mine, gathered_.data(), bytes);
    for (int r = 0; r < world; ++r) validate_payload(gathered_.data() + r * bytes, bytes, r);
    // Every replica (this one included) uses the decoded values, summed in rank order.
    std::fill(delta_.begin(), delta_.end(), 0.0f);
    for (int r = 0; r < world; ++r) decode_add(gathered_.data() + r * bytes, delta_.data());
    const float inv = 1.0f / static_cast<float>(world);
    for (int64_t i = 0; i < n; ++i) delta_[i] *= inv;
  }
  apply_mean(delta_.data(), params);
}

std::vector<int> DilocoOuter::outer_step(float* params, QuorumExchange& exchange,
                                         const std::string& key, const std::string& what) {
  BRIGADE_CHECK(!powersgd_) << "diloco powersgd has no quorum exchange";
  pseudo_gradient(params, delta_.data());
  const int64_t bytes = payload_bytes();
  const uint8_t* mine = encode_delta();
  std::vector<int> members = exchange.exchange(key, what, mine, bytes, gathered_);
  const int m = static_cast<int>(members.size());
  for (int i = 0; i < m; ++i) validate_payload(gathered_.data() + i * bytes, bytes, members[i]);
  if (std::find(members.begin(), members.end(), exchange.rank()) == members.end()) {
    // Left out: nothing of this Delta reached the mean, so all of it stays in the residual.
    if (dct_) dct_->decode_add(payload_.data(), 1.0f, residual_.data());
    if (sign_) sign_->return_unsent(payload_.data());
  }
  std::vector<int> used = combine_members(members, bytes, exchange, what);
  apply_mean(delta_.data(), params);
  return used;
}

std::vector<int> DilocoOuter::combine_members(const std::vector<int>& members, int64_t bytes,
                                              QuorumExchange& exchange, const std::string& what) {
  const int64_t n = end_ - begin_;
  const int m = static_cast<int>(members.size());
  // Each member decoded on its own, in rank order: every replica sees the same payloads and
  // makes the same choices, so theta_global stays bitwise identical everywhere.
  member_deltas_.resize(static_cast<size_t>(m));
  std::vector<const float*> finite;
  std::vector<int> used;
  for (int i = 0; i < m; ++i) {
    std::vector<float>& d = member_deltas_[static_cast<size_t>(i)];
    d.assign(static_cast<size_t>(n), 0.0f);
    decode_add(gathered_.data() + i * bytes, d.data());
    if (!std::all_of(d.begin(), d.end(), [](float x) { return std::isfinite(x); })) {
      exchange.note(what + ": the pseudo-gradient of rank " + std::to_string(members[i]) +
                    " is not finite; it is left out of the step");
      continue;
    }
    if (config_.outer_norm_bound > 0) bound_norm(d.data(), n, config_.outer_norm_bound);
    finite.push_back(d.data());
    used.push_back(members[i]);
  }
  const RobustRule& rule = config_.outer_rule;
  const bool krum = rule.name == "krum" || rule.name == "multi_krum";
  const auto k = static_cast<int64_t>(finite.size());
  if (k == 0 || (krum && k <= 2 * rule.byzantine + 2) ||
      (rule.name == "trimmed_mean" &&
       2 * static_cast<int64_t>(rule.trim_fraction * static_cast<double>(k)) >= k)) {
    throw CommError(CommError::Kind::kOther,
                    what + ": " + std::to_string(k) + " usable pseudo-gradient(s) of " +
                        std::to_string(m) +
                        " members, too few for sync.outer_aggregator = " + rule.name);
  }
  if (rule.name == "mean") {  // DiLoCo's average, summed in rank order
    std::fill(delta_.begin(), delta_.end(), 0.0f);
    for (const float* d : finite) {
      for (int64_t j = 0; j < n; ++j) delta_[j] += d[j];
    }
    const float inv = 1.0f / static_cast<float>(k);
    for (int64_t j = 0; j < n; ++j) delta_[j] *= inv;
    return used;
  }
  const std::vector<int> chosen = robust_combine(rule, finite, {}, n, delta_.data());
  if (krum) {
    std::string list;
    for (int i : chosen) list += (list.empty() ? "" : ",") + std::to_string(used[i]);
    exchange.note(what + ": " + rule.name + " chose rank(s) " + list);
    std::vector<int> kept;
    for (int i : chosen) kept.push_back(used[static_cast<size_t>(i)]);
    return kept;
  }
  return used;
}

Traffic DilocoOuter::quorum_bytes_per_step(int world) const {
  const int64_t bytes = payload_bytes();
  return Traffic{bytes, (world - 1) * bytes, 2 + (world - 1)};
}

int64_t DilocoOuter::payload_bytes() const {
  switch (config_.wire) {
    case OuterWire::kF32:
      return 4 * (end_ - begin_);
    case OuterWire::kInt8:
      return codec_.size_bytes();
    case OuterWire::kDctTopk:
      return dct_->size_bytes();
    case OuterWire::kSign:
      return sign_->one_shard_bytes();
    case OuterWire::kPowerSgd:
      return 4 * (powersgd_->p_floats() + powersgd_->q_floats());
  }
  return 0;
}

Traffic DilocoOuter::bytes_per_step(int world, int rank) const {
  if (config_.wire == OuterWire::kF32) return all_reduce_f32_traffic(end_ - begin_, world, rank);
  if (config_.wire == OuterWire::kSign) return sign_->bytes_per_call(world, rank);
  if (config_.wire == OuterWire::kPowerSgd) return powersgd_->bytes_per_step(world, rank);
  return all_gather_equal_traffic(payload_bytes(), world, rank);
}

std::vector<StateView> DilocoOuter::state_tensors() {
  std::vector<StateView> out{{"diloco.global", global_.data(), begin_, end_}};
  if (!momentum_.empty()) out.push_back({"diloco.momentum", momentum_.data(), begin_, end_});
  if (powersgd_ && powersgd_->q_floats() > 0) {
    out.push_back(
        {"diloco.powersgd_q", powersgd_->q_state().data(), 0, powersgd_->q_floats(), false});
  }
  return out;
}

std::vector<StateView> DilocoOuter::local_state_tensors() {
  if (sign_) return sign_->state_tensors("diloco");
  if (powersgd_) {
    std::vector<StateView> v = powersgd_->state_tensors();
    v[0].name = "diloco.residual";
    return v;
  }
  if (residual_.empty()) return {};
  return {{"diloco.residual", residual_.data(), begin_, end_}};
}

FlatRange fragment_range(int64_t begin, int64_t end, int num_fragments, int fragment) {
  BRIGADE_CHECK(begin <= end && num_fragments >= 1 && fragment >= 0 && fragment < num_fragments)
      << "fragment " << fragment << " of " << num_fragments << " over [" << begin << ", " << end
      << ")";
  const int64_t n = end - begin, base = n / num_fragments, extra = n % num_fragments;
  auto cut = [&](int64_t f) { return begin + f * base + std::min<int64_t>(f, extra); };
  return FlatRange{cut(fragment), cut(fragment + 1)};
}

FlatRange fragment_range_aligned(const ParamLayout& layout, int64_t begin, int64_t end,
                                 int num_fragments, int fragment) {
  BRIGADE_CHECK(0 <= begin && begin <= end && end <= layout.total())
      << "range [" << begin << ", " << end << ") of " << layout.total();
  // Tensor boundaries inside the range, plus its ends.
  auto nearest_boundary = [&](int64_t target, int64_t floor) {
    int64_t best = end;
    int64_t best_dist = end - target;
    auto consider = [&](int64_t b) {
      if (b < floor || b < begin || b > end) return;
      const int64_t dist = b > target ? b - target : target - b;
      if (dist < best_dist || (dist == best_dist && b < best)) {
        best = b;
        best_dist = dist;
      }
    };
    consider(begin);
    for (const ParamSpec& s : layout.specs()) consider(s.offset);
    consider(end);
    return best;
  };
  int64_t lo = begin;
  for (int f = 1; f <= fragment; ++f) {
    lo = nearest_boundary(fragment_range(begin, end, num_fragments, f).begin, lo);
  }
  int64_t hi = end;
  if (fragment + 1 < num_fragments) {
    hi = nearest_boundary(fragment_range(begin, end, num_fragments, fragment + 1).begin, lo);
  }
  return FlatRange{lo, hi};
}

int streaming_fragment_at(int64_t step, int64_t period, int num_fragments) {
  BRIGADE_CHECK(step >= 1 && num_fragments >= 1 && num_fragments <= period)
      << "step " << step << " period " << period << " fragments " << num_fragments;
  const int64_t phase = step % period;
  for (int f = 0; f < num_fragments; ++f) {
    if ((int64_t{f + 1} * period / num_fragments) % period == phase) return f;
  }
  return -1;
}

}  // namespace brigade
