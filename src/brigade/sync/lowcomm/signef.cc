#include "brigade/sync/lowcomm/signef.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "brigade/base/check.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/sync/lowcomm/payload.h"

namespace brigade {

namespace {
constexpr int64_t kHeaderBytes = 20;
}  // namespace

SignEf::SignEf(const ParamLayout& layout, int64_t begin, int64_t end) : begin_(begin), end_(end) {
  BRIGADE_CHECK(0 <= begin && begin <= end && end <= layout.total())
      << "range [" << begin << ", " << end << ") of " << layout.total();
  for (const ParamSpec& s : layout.specs()) {
    const int64_t lo = std::max(begin, s.offset), hi = std::min(end, s.offset + s.numel);
    if (lo < hi) segments_.push_back(Segment{lo, hi});
  }
  error_.assign(static_cast<size_t>(end - begin), 0.0f);
  payload_.assign(payload_bytes(), 0);
}

int64_t SignEf::payload_bytes() const {
  return kHeaderBytes + 4 * num_segments() + value_bytes(ValueFormat::kSign, end_ - begin_);
}

void SignEf::compress(const float* grads, float scale, uint8_t* payload, float* sent) {
  const int64_t S = num_segments(), n = end_ - begin_;
  detail::put_u32(payload, detail::kSignMagic);
  payload[4] = detail::kPayloadVersion;
  payload[5] = payload[6] = payload[7] = 0;
  detail::put_u32(payload + 8, static_cast<uint32_t>(S));
  detail::put_u64(payload + 12, static_cast<uint64_t>(n));
  uint8_t* bits = payload + kHeaderBytes + 4 * S;
  std::memset(bits, 0, static_cast<size_t>(value_bytes(ValueFormat::kSign, n)));
  for (int64_t s = 0; s < S; ++s) {
    const Segment seg = segments_[s];
    float* e = error_.data() + (seg.begin - begin_);
    const float* g = grads + seg.begin;
    const int64_t d = seg.end - seg.begin;
    double l1 = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      e[i] += scale * g[i];  // e now holds q
      l1 += std::fabs(e[i]);
    }
    const float mag = static_cast<float>(l1 / static_cast<double>(d));
    detail::put_f32(payload + kHeaderBytes + 4 * s, mag);
    const int64_t first = seg.begin - begin_;
    for (int64_t i = 0; i < d; ++i) {
      const bool neg = e[i] < 0.0f;
      if (neg) bits[(first + i) >> 3] |= static_cast<uint8_t>(1u << ((first + i) & 7));
      const float delta = neg ? -mag : mag;
      if (sent) sent[first + i] = delta;
      e[i] -= delta;
    }
  }
}

void SignEf::validate(const uint8_t* data, int64_t size) const {
  detail::WireReader in(data, size, "sign payload");
  if (in.u32() != detail::kSignMagic) in.fail("bad magic (not a sign payload)");
  if (in.u8() != detail::kPayloadVersion) in.fail("bad version");
  if (in.u8() != 0 || in.u8() != 0 || in.u8() != 0) in.fail("reserved bytes not zero");
  const uint32_t S = in.u32();
  const uint64_t n = in.u64();
  if (S != num_segments() || n != static_cast<uint64_t>(end_ - begin_)) {
    in.fail(std::to_string(S) + " segments of " + std::to_string(n) +
            " values, this replica expects " + std::to_string(num_segments()) + " of " +
            std::to_string(end_ - begin_));
  }
  if (size != payload_bytes()) {
    in.fail("length " + std::to_string(size) + ", expected " + std::to_string(payload_bytes()));
  }
}

void SignEf::decode_mean(const uint8_t* payloads, int world, float* update) const {
  BRIGADE_CHECK(world >= 1) << "world " << world;
  const int64_t bytes = payload_bytes(), S = num_segments();
  for (int r = 0; r < world; ++r) {
    try {
      validate(payloads + r * bytes, bytes);
    } catch (const PayloadError& e) {
      throw PayloadError("signef: from rank " + std::to_string(r) + ": " + e.what());
    }
  }
  float* out = update + begin_;
  std::fill(out, out + (end_ - begin_), 0.0f);
  for (int r = 0; r < world; ++r) {
    const uint8_t* p = payloads + r * bytes;
    const uint8_t* bits = p + kHeaderBytes + 4 * S;
    for (int64_t s = 0; s < S; ++s) {
      float mag;
      std::memcpy(&mag, p + kHeaderBytes + 4 * s, 4);
      for (int64_t i = segments_[s].begin - begin_; i < segments_[s].end - begin_; ++i) {
        out[i] += (bits[i >> 3] >> (i & 7)) & 1u ? -mag : mag;
      }
    }
  }
  const float inv = 1.0f / static_cast<float>(world);
  for (int64_t i = 0; i < end_ - begin_; ++i) out[i] *= inv;
}

void SignEf::step(const float* grads, float scale, float* update, Communicator& comm) {
  exchange_equal_payloads(*this, grads, scale, update, comm, payload_, gathered_);
}

Traffic SignEf::bytes_per_step(int world, int rank) const {
  return all_gather_equal_traffic(payload_bytes(), world, rank);
}

std::vector<StateView> SignEf::state_tensors() {
  return {{"signef.error", error_.data(), begin_, end_}};
}

}  // namespace brigade
