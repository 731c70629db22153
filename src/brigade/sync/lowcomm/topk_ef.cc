#include "brigade/sync/lowcomm/topk_ef.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/sync/lowcomm/topk.h"

namespace brigade {

namespace {
constexpr int64_t kHeaderBytes = 24;
}  // namespace

void TopkEfConfig::validate() const {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw ConfigError("topk_ef.fraction = " + std::to_string(fraction) + ": must be in (0, 1]");
  }
  if (values == ValueFormat::kSign) {
    throw ConfigError("topk_ef.values = \"1bit\": expected \"f32\" or \"bf16\"");
  }
}

TopkEf::TopkEf(const TopkEfConfig& config, int64_t begin, int64_t end)
    : config_(config), begin_(begin), end_(end) {
  config_.validate();
  BRIGADE_CHECK(0 <= begin && begin <= end &&
                end - begin <= int64_t{std::numeric_limits<uint32_t>::max()})
      << "range [" << begin << ", " << end << ")";
  const int64_t d = end - begin;
  k_ = std::min<int64_t>(d, static_cast<int64_t>(std::ceil(config_.fraction * d)));
  if (d > 0) k_ = std::max<int64_t>(k_, 1);
  error_.assign(d, 0.0f);
  scratch_.assign(d, 0.0f);
  idx_.assign(k_, 0);
  val_.assign(k_, 0.0f);
  payload_.assign(payload_bytes(), 0);
}

int64_t TopkEf::payload_bytes() const {
  return kHeaderBytes + 4 * k_ + value_bytes(config_.values, k_);
}

void TopkEf::compress(const float* grads, float scale, uint8_t* payload, float* sent) {
  const int64_t d = end_ - begin_;
  const float* g = grads + begin_;
  for (int64_t i = 0; i < d; ++i) error_[i] += scale * g[i];  // error_ now holds acc
  topk_abs(error_.data(), d, k_, scratch_.data(), idx_.data(), val_.data());
  detail::put_u32(payload, detail::kTopkMagic);
  payload[4] = detail::kPayloadVersion;
  payload[5] = static_cast<uint8_t>(config_.values);
  payload[6] = payload[7] = 0;
  detail::put_u64(payload + 8, static_cast<uint64_t>(d));
  detail::put_u64(payload + 16, static_cast<uint64_t>(k_));
  uint8_t* ip = payload + kHeaderBytes;
  uint8_t* vp = ip + 4 * k_;
  if (sent) std::fill(sent, sent + d, 0.0f);
  for (int64_t j = 0; j < k_; ++j) {
    detail::put_u32(ip + 4 * j, idx_[j]);
    put_value(vp, config_.values, j, val_[j]);
    const float wire = round_trip_value(config_.values, val_[j]);
    error_[idx_[j]] -= wire;
    if (sent) sent[idx_[j]] = wire;
  }
}

void TopkEf::validate(const uint8_t* data, int64_t size) const {
  detail::WireReader in(data, size, "top-k payload");
  if (in.u32() != detail::kTopkMagic) in.fail("bad magic (not a top-k payload)");
  if (in.u8() != detail::kPayloadVersion) in.fail("bad version");
  const uint8_t format = in.u8();
  if (format != static_cast<uint8_t>(config_.values)) {
    in.fail("value format " + std::to_string(format) + ", expected " +
            value_format_name(config_.values));
  }
  if (in.u8() != 0 || in.u8() != 0) in.fail("reserved bytes not zero");
  const uint64_t d = in.u64(), k = in.u64();
  if (d != static_cast<uint64_t>(end_ - begin_) || k != static_cast<uint64_t>(k_)) {
    in.fail("holds " + std::to_string(k) + " of " + std::to_string(d) +
            " entries, this replica expects " + std::to_string(k_) + " of " +
            std::to_string(end_ - begin_));
  }
  if (size != payload_bytes()) {
    in.fail("length " + std::to_string(size) + ", expected " + std::to_string(payload_bytes()));
  }
  const uint8_t* ip = data + kHeaderBytes;
  int64_t prev = -1;
  for (int64_t j = 0; j < k_; ++j) {
    const int64_t i = detail::get_u32(ip + 4 * j);
    if (i >= end_ - begin_ || i <= prev) {
      throw PayloadError("top-k payload: entry " + std::to_string(j) + ": index " +
                         std::to_string(i) +
                         (i >= end_ - begin_ ? " out of range" : " not ascending"));
    }
    prev = i;
  }
}

void TopkEf::decode_mean(const uint8_t* payloads, int world, float* update) const {
  BRIGADE_CHECK(world >= 1) << "world " << world;
  const int64_t bytes = payload_bytes();
  for (int r = 0; r < world; ++r) {
    try {
      validate(payloads + r * bytes, bytes);
    } catch (const PayloadError& e) {
      throw PayloadError("topk_ef: from rank " + std::to_string(r) + ": " + e.what());
    }
  }
  float* out = update + begin_;
  std::fill(out, out + (end_ - begin_), 0.0f);
  for (int r = 0; r < world; ++r) {
    const uint8_t* ip = payloads + r * bytes + kHeaderBytes;
    const uint8_t* vp = ip + 4 * k_;
    for (int64_t j = 0; j < k_; ++j)
      out[detail::get_u32(ip + 4 * j)] += get_value(vp, config_.values, j);
  }
  const float inv = 1.0f / static_cast<float>(world);
  for (int64_t i = 0; i < end_ - begin_; ++i) out[i] *= inv;
}

void TopkEf::step(const float* grads, float scale, float* update, Communicator& comm) {
  exchange_equal_payloads(*this, grads, scale, update, comm, payload_, gathered_);
}

Traffic TopkEf::bytes_per_step(int world, int rank) const {
  return all_gather_equal_traffic(payload_bytes(), world, rank);
}

std::vector<StateView> TopkEf::state_tensors() {
  return {{"topk_ef.error", error_.data(), begin_, end_}};
}

}  // namespace brigade
