#include "brigade/sync/lowcomm/sign_allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "brigade/base/check.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/sync/lowcomm/payload.h"

namespace brigade {

SignAllReduce::SignAllReduce(const ParamLayout& layout, int64_t begin, int64_t end, int64_t block)
    : begin_(begin), end_(end) {
  BRIGADE_CHECK(0 <= begin && begin <= end && end <= layout.total())
      << "range [" << begin << ", " << end << ") of " << layout.total();
  BRIGADE_CHECK(block >= 8) << "sign block " << block;
  for (const ParamSpec& s : layout.specs()) {
    const int64_t lo = std::max(begin, s.offset), hi = std::min(end, s.offset + s.numel);
    for (int64_t b = lo; b < hi; b += block) {
      blocks_.push_back(Block{b - begin, std::min(hi, b + block) - begin});
    }
  }
  residual_.assign(static_cast<size_t>(end - begin), 0.0f);
  owner_residual_.assign(static_cast<size_t>(end - begin), 0.0f);
  mean_.assign(static_cast<size_t>(end - begin), 0.0f);
  whole_ = shards_for(1)[0];
}

std::vector<SignAllReduce::Shard> SignAllReduce::shards_for(int world) const {
  BRIGADE_CHECK(world >= 1) << "world " << world;
  const int64_t n = end_ - begin_, nb = num_blocks();
  std::vector<Shard> out;
  int64_t b = 0;
  for (int j = 0; j < world; ++j) {
    // Shard j ends at the first block edge at or past its even share of the values.
    const int64_t target = n * (j + 1) / world;
    Shard s{b, b, b < nb ? blocks_[b].begin : n, 0, 0};
    while (b < nb && (j + 1 == world || blocks_[b].end <= target)) ++b;
    if (b == s.first_block && b < nb && j + 1 < world && blocks_[b].begin < target) ++b;
    s.last_block = b;
    s.end = b > s.first_block ? blocks_[b - 1].end : s.begin;
    s.bytes = 4 * (s.last_block - s.first_block) + value_bytes(ValueFormat::kSign, s.end - s.begin);
    out.push_back(s);
  }
  return out;
}

const std::vector<SignAllReduce::Shard>& SignAllReduce::shards(int world) {
  if (world != cached_world_) {
    shards_ = shards_for(world);
    cached_world_ = world;
    cached_message_bytes_ = 0;
    for (const Shard& s : shards_) cached_message_bytes_ = std::max(cached_message_bytes_, s.bytes);
  }
  return shards_;
}

int64_t SignAllReduce::message_bytes(int world) const {
  if (world == cached_world_) return cached_message_bytes_;
  int64_t m = 0;
  for (const Shard& s : shards_for(world)) m = std::max(m, s.bytes);
  return m;
}

int64_t SignAllReduce::one_shard_bytes() const {
  return whole_.bytes;
}

Traffic SignAllReduce::bytes_per_call(int world, int rank) const {
  const int64_t m = message_bytes(world);
  const std::vector<int64_t> each(world, m);
  return pairwise_alltoallv_traffic(each, each, rank) + all_gather_equal_traffic(m, world, rank);
}

void SignAllReduce::quantize(const Shard& s, float* v, uint8_t* msg, int64_t padded_bytes,
                             float* sent) const {
  std::memset(msg, 0, static_cast<size_t>(padded_bytes));
  uint8_t* bits = msg + 4 * (s.last_block - s.first_block);
  for (int64_t b = s.first_block; b < s.last_block; ++b) {
    const Block blk = blocks_[b];
    double l1 = 0.0;
    for (int64_t i = blk.begin; i < blk.end; ++i) l1 += std::fabs(v[i]);
    const float scale = static_cast<float>(l1 / static_cast<double>(blk.end - blk.begin));
    detail::put_f32(msg + 4 * (b - s.first_block), scale);
    for (int64_t i = blk.begin; i < blk.end; ++i) {
      const int64_t bit = i - s.begin;
      const bool neg = v[i] < 0.0f;
      if (neg) bits[bit >> 3] |= static_cast<uint8_t>(1u << (bit & 7));
      const float q = neg ? -scale : scale;
      if (sent) sent[i] = q;
      v[i] -= q;
    }
  }
}

void SignAllReduce::check(const Shard& s, const uint8_t* msg, int64_t padded_bytes,
                          int from) const {
  for (int64_t b = 0; b < s.last_block - s.first_block; ++b) {
    float scale;
    std::memcpy(&scale, msg + 4 * b, 4);
    if (!(scale >= 0.0f && std::isfinite(scale))) {
      throw PayloadError("1-bit all-reduce: from rank " + std::to_string(from) + ": block " +
                         std::to_string(s.first_block + b) + " has scale " + std::to_string(scale) +
                         " (must be finite and >= 0)");
    }
  }
  for (int64_t i = s.bytes; i < padded_bytes; ++i) {
    if (msg[i] != 0) {
      throw PayloadError("1-bit all-reduce: from rank " + std::to_string(from) + ": padding byte " +
                         std::to_string(i) + " is not zero");
    }
  }
}

void SignAllReduce::add_decoded(const Shard& s, const uint8_t* msg, float weight,
                                float* sum) const {
  const uint8_t* bits = msg + 4 * (s.last_block - s.first_block);
  for (int64_t b = s.first_block; b < s.last_block; ++b) {
    float scale;
    std::memcpy(&scale, msg + 4 * (b - s.first_block), 4);
    const float w = weight * scale;
    for (int64_t i = blocks_[b].begin; i < blocks_[b].end; ++i) {
      const int64_t bit = i - s.begin;
      sum[i] += (bits[bit >> 3] >> (bit & 7)) & 1u ? -w : w;
    }
  }
}

void SignAllReduce::all_reduce_mean(float* x, Communicator& comm) {
  const int world = comm.size(), me = comm.rank();
  const std::vector<Shard>& sh = shards(world);
  const int64_t m = cached_message_bytes_, n = end_ - begin_;
  if (static_cast<int64_t>(send_.size()) < world * m) {
    send_.resize(world * m);
    recv_.resize(world * m);
  }
  // Worker stage: this replica's values plus what its earlier signs left out.
  for (int64_t i = 0; i < n; ++i) residual_[i] += x[i];
  for (int j = 0; j < world; ++j) quantize(sh[j], residual_.data(), send_.data() + j * m, m);
  comm.all_to_all_bytes(send_.data(), recv_.data(), m);

  // Owner stage: the mean of every replica's shard `me`, plus what the owner's signs left out.
  const Shard& own = sh[me];
  float* mean = mean_.data();  // indexed like the range; only [own.begin, own.end) is used
  std::fill(mean + own.begin, mean + own.end, 0.0f);
  for (int p = 0; p < world; ++p) {
    check(own, recv_.data() + p * m, m, p);
    add_decoded(own, recv_.data() + p * m, 1.0f, mean);
  }
  const float inv = 1.0f / static_cast<float>(world);
  for (int64_t i = own.begin; i < own.end; ++i) owner_residual_[i] += mean[i] * inv;
  quantize(own, owner_residual_.data(), send_.data(), m);
  comm.all_gather_bytes(send_.data(), recv_.data(), m);

  std::fill(x, x + n, 0.0f);
  for (int j = 0; j < world; ++j) {
    check(sh[j], recv_.data() + j * m, m, j);
    add_decoded(sh[j], recv_.data() + j * m, 1.0f, x);
  }
}

void SignAllReduce::encode(const float* x, uint8_t* out, float* sent) {
  for (int64_t i = 0; i < end_ - begin_; ++i) residual_[i] += x[i];
  quantize(whole_, residual_.data(), out, whole_.bytes, sent);
}

void SignAllReduce::validate(const uint8_t* data, int64_t size, int from) const {
  if (size != whole_.bytes) {
    throw PayloadError("1-bit payload from rank " + std::to_string(from) + ": length " +
                       std::to_string(size) + ", expected " + std::to_string(whole_.bytes));
  }
  check(whole_, data, size, from);
}

void SignAllReduce::decode_add(const uint8_t* data, float weight, float* sum) const {
  add_decoded(whole_, data, weight, sum);
}

std::vector<StateView> SignAllReduce::state_tensors(const std::string& prefix) {
  return {{prefix + ".residual", residual_.data(), begin_, end_},
          {prefix + ".owner_residual", owner_residual_.data(), begin_, end_}};
}

}  // namespace brigade
