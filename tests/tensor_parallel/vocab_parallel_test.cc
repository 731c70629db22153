// The vocab-parallel kernels, run for every rank of a simulated tp group in one process with
// the all-reduces done by hand, against the single-device kernels (fused cross-entropy,
// encoder) on the whole vocabulary; including a vocab that needs padding and a rank whose
// shard is all padding.
#include "brigade/kernels/cpu/vocab_parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "brigade/kernels/cpu/crossentropy.h"
#include "brigade/kernels/cpu/encoder.h"
#include "brigade/tensor/rng.h"

namespace brigade {
namespace {

std::vector<float> normal(int64_t n, float std, uint64_t key) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_normal(v.data(), n, 0.0f, std, 9, key);
  return v;
}

// logits (N,V) cut into tp shards of Vl = ceil(V/tp) columns; padding columns hold garbage
// that must be ignored.
std::vector<float> shard_of(const std::vector<float>& logits, int64_t N, int64_t V, int tp, int r) {
  const int64_t Vl = (V + tp - 1) / tp;
  std::vector<float> s(static_cast<size_t>(N * Vl), 1e4f);  // garbage in padding
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < Vl; ++j)
      if (r * Vl + j < V) s[n * Vl + j] = logits[n * V + r * Vl + j];
  return s;
}

TEST(VocabParallel, CrossEntropyEqualsTheFusedKernelOnTheWholeVocab) {
  const int64_t N = 6;
  for (int64_t V : {13, 16, 5}) {
    for (int tp : {1, 2, 4}) {
      const int64_t Vl = (V + tp - 1) / tp;
      const std::vector<float> logits = normal(N * V, 3.0f, 1);
      std::vector<int32_t> targets(N);
      for (int64_t n = 0; n < N; ++n) targets[n] = static_cast<int32_t>((n * 7) % V);
      targets[2] = -1;  // ignored row
      std::vector<float> want_loss(N), want_lse(N), want_d(static_cast<size_t>(N * V));
      crossentropy_forward(want_loss.data(), want_lse.data(), logits.data(), targets.data(), N, V);
      crossentropy_backward(want_d.data(), logits.data(), want_lse.data(), targets.data(), 0.5f, N,
                            V);

      std::vector<std::vector<float>> shards;
      for (int r = 0; r < tp; ++r) shards.push_back(shard_of(logits, N, V, tp, r));
      // Pass 1 and the max all-reduce.
      std::vector<float> row_max(N, -INFINITY), part(N);
      for (int r = 0; r < tp; ++r) {
        vocab_parallel_ce_max(part.data(), shards[r].data(), N, Vl, r * Vl, V);
        for (int64_t n = 0; n < N; ++n) row_max[n] = std::max(row_max[n], part[n]);
      }
      // Pass 2 and the sum all-reduce.
      std::vector<float> sums(2 * N, 0.0f), psums(2 * N);
      for (int r = 0; r < tp; ++r) {
        vocab_parallel_ce_sums(psums.data(), shards[r].data(), row_max.data(), targets.data(), N,
                               Vl, r * Vl, V);
        for (int64_t i = 0; i < 2 * N; ++i) sums[i] += psums[i];
      }
      std::vector<float> loss(N), lse(N);
      vocab_parallel_ce_finish(loss.data(), lse.data(), row_max.data(), sums.data(), targets.data(),
                               N);
      for (int64_t n = 0; n < N; ++n) {
        EXPECT_NEAR(loss[n], want_loss[n], 1e-5f * (1.0f + want_loss[n])) << "V " << V;
        if (targets[n] >= 0) {
          EXPECT_NEAR(lse[n], want_lse[n], 1e-5f * (1.0f + want_lse[n]));
        }
      }
      for (int r = 0; r < tp; ++r) {
        std::vector<float> d = shards[r];  // in place, as the model does
        vocab_parallel_ce_backward(d.data(), d.data(), lse.data(), targets.data(), 0.5f, N, Vl,
                                   r * Vl, V);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < Vl; ++j) {
            const int64_t col = r * Vl + j;
            const float want = col < V ? want_d[n * V + col] : 0.0f;
            EXPECT_NEAR(d[n * Vl + j], want, 1e-6f) << "V " << V << " tp " << tp << " col " << col;
          }
      }
    }
  }
}

TEST(VocabParallel, EmbeddingSumsToTheEncoder) {
  const int64_t B = 2, T = 5, C = 4, V = 11, N = B * T;
  const std::vector<float> wte = normal(V * C, 1.0f, 2), wpe = normal(T * C, 1.0f, 3);
  std::vector<int32_t> tokens(N);
  for (int64_t i = 0; i < N; ++i) tokens[i] = static_cast<int32_t>((i * 5 + 3) % V);
  const std::vector<float> dout = normal(N * C, 1.0f, 4);
  std::vector<float> want(N * C), want_dwte(V * C, 0.0f), want_dwpe(T * C, 0.0f);
  encoder_forward(want.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
  encoder_backward(want_dwte.data(), want_dwpe.data(), dout.data(), tokens.data(), B, T, C);

  for (int tp : {2, 4}) {
    const int64_t Vl = (V + tp - 1) / tp;
    std::vector<float> sum(N * C, 0.0f), out(N * C);
    for (int r = 0; r < tp; ++r) {
      std::vector<float> shard(Vl * C, 0.0f), dshard(Vl * C, 0.0f);
      for (int64_t i = 0; i < Vl * C && r * Vl * C + i < V * C; ++i) shard[i] = wte[r * Vl * C + i];
      vocab_parallel_embedding_forward(out.data(), tokens.data(), shard.data(), N, C, r * Vl, Vl);
      for (int64_t i = 0; i < N * C; ++i) sum[i] += out[i];
      vocab_parallel_embedding_backward(dshard.data(), dout.data(), tokens.data(), N, C, r * Vl,
                                        Vl);
      for (int64_t i = 0; i < Vl * C; ++i) {
        const int64_t g = r * Vl * C + i;
        EXPECT_EQ(dshard[i], g < V * C ? want_dwte[g] : 0.0f) << "tp " << tp;
      }
    }
    // Positions added per sequence shard (row0 = 3: rows 3..9 of the (B,T) grid).
    position_embedding_forward(sum.data(), wpe.data(), 0, 3, T, C);
    position_embedding_forward(sum.data() + 3 * C, wpe.data(), 3, N - 3, T, C);
    for (int64_t i = 0; i < N * C; ++i) EXPECT_FLOAT_EQ(sum[i], want[i]);
    std::vector<float> dwpe(T * C, 0.0f);
    position_embedding_backward(dwpe.data(), dout.data(), 0, 4, T, C);
    position_embedding_backward(dwpe.data(), dout.data() + 4 * C, 4, N - 4, T, C);
    for (int64_t i = 0; i < T * C; ++i) EXPECT_NEAR(dwpe[i], want_dwpe[i], 1e-6f);
  }
}

}  // namespace
}  // namespace brigade
