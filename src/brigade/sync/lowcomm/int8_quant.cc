#include "brigade/sync/lowcomm/int8_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "brigade/base/check.h"
#include "brigade/sync/lowcomm/payload.h"

namespace brigade {

namespace {
constexpr int64_t kHeaderBytes = 24;
constexpr int64_t kTableBytes = 256 * 4;
}  // namespace

Int8Codec::Int8Codec(int64_t n, int64_t chunk) : n_(n), chunk_(chunk) {
  BRIGADE_CHECK(n >= 0 && chunk >= 1 && chunk <= int64_t{0xffffffff})
      << "n " << n << " chunk " << chunk;
  BRIGADE_CHECK(num_chunks() <= int64_t{0xffffffff}) << "too many chunks";
}

int64_t Int8Codec::size_bytes() const {
  return kHeaderBytes + num_chunks() * kTableBytes + n_;
}

void Int8Codec::encode(const float* x, uint8_t* out) const {
  detail::put_u32(out, detail::kInt8Magic);
  out[4] = detail::kPayloadVersion;
  out[5] = out[6] = out[7] = 0;
  detail::put_u64(out + 8, static_cast<uint64_t>(n_));
  detail::put_u32(out + 16, static_cast<uint32_t>(chunk_));
  detail::put_u32(out + 20, static_cast<uint32_t>(num_chunks()));
  uint8_t* p = out + kHeaderBytes;
  for (int64_t lo = 0; lo < n_; lo += chunk_) {
    const int64_t m = std::min(chunk_, n_ - lo);
    const float* xc = x + lo;
    double sq = 0.0;
    for (int64_t i = 0; i < m; ++i) sq += double{xc[i]} * xc[i];
    const double sigma = std::sqrt(sq / static_cast<double>(std::max<int64_t>(m - 1, 1)));
    const float scale = static_cast<float>(6.0 * sigma / 256.0);
    const bool flat = !(scale > 0.0f) || !std::isfinite(scale);
    uint8_t* q = p + kTableBytes;
    double sum[256] = {};
    int64_t count[256] = {};
    for (int64_t i = 0; i < m; ++i) {
      int b = 128;
      if (!flat) {
        const float r = std::nearbyint(xc[i] / scale);
        b = r <= -128.0f ? 0 : r >= 127.0f ? 255 : static_cast<int>(r) + 128;
      }
      q[i] = static_cast<uint8_t>(b);
      sum[b] += xc[i];
      count[b] += 1;
    }
    for (int b = 0; b < 256; ++b) {
      const float mean = count[b] > 0 ? static_cast<float>(sum[b] / static_cast<double>(count[b]))
                                      : (flat ? 0.0f : static_cast<float>(b - 128) * scale);
      detail::put_f32(p + 4 * b, mean);
    }
    p += kTableBytes + m;
  }
}

void Int8Codec::validate(const uint8_t* data, int64_t size) const {
  detail::WireReader in(data, size, "int8 payload");
  if (in.u32() != detail::kInt8Magic) in.fail("bad magic (not an int8 payload)");
  if (in.u8() != detail::kPayloadVersion) in.fail("bad version");
  if (in.u8() != 0 || in.u8() != 0 || in.u8() != 0) in.fail("reserved bytes not zero");
  const uint64_t n = in.u64();
  const uint32_t chunk = in.u32();
  const uint32_t chunks = in.u32();
  if (n != static_cast<uint64_t>(n_) || chunk != chunk_) {
    in.fail("holds " + std::to_string(n) + " values in chunks of " + std::to_string(chunk) +
            ", this replica expects " + std::to_string(n_) + " in chunks of " +
            std::to_string(chunk_));
  }
  if (chunks != num_chunks()) in.fail("chunk count " + std::to_string(chunks));
  if (size != size_bytes()) {
    in.fail("length " + std::to_string(size) + ", expected " + std::to_string(size_bytes()));
  }
}

void Int8Codec::decode(const uint8_t* data, float* out) const {
  std::fill(out, out + n_, 0.0f);
  decode_add(data, out);
}

void Int8Codec::decode_add(const uint8_t* data, float* out) const {
  const uint8_t* p = data + kHeaderBytes;
  float table[256];
  for (int64_t lo = 0; lo < n_; lo += chunk_) {
    const int64_t m = std::min(chunk_, n_ - lo);
    std::memcpy(table, p, kTableBytes);
    const uint8_t* q = p + kTableBytes;
    for (int64_t i = 0; i < m; ++i) out[lo + i] += table[q[i]];
    p += kTableBytes + m;
  }
}

}  // namespace brigade
