#pragma once
// Kernels of the vocab-parallel embedding and cross-entropy (Megatron's VocabParallelEmbedding
// and vocab_parallel_cross_entropy). The vocabulary V is padded to Vp = tp * Vl and rank r
// holds rows [v0, v0 + Vl) of wte, v0 = r * Vl; rows >= V are padding. The tied head then
// produces this rank's columns [v0, v0 + Vl) of the logits, and the cross-entropy runs in three
// local passes around two all-reduces, so the full (N, V) logits never exist anywhere:
//   row_max  = local max over real columns           -> all-reduce max
//   sums     = (sum_j exp(logit - max), target logit) -> all-reduce sum
//   lse      = max + log(sum);  loss = lse - target logit
// Padding columns are skipped in every pass (their logit is as if -inf: no probability, zero
// gradient), so the loss is that of the unpadded vocabulary. No allocation.
#include <cstdint>

namespace brigade {

// out[n,:] = wte_shard[tokens[n] - v0,:] if v0 <= tokens[n] < v0 + Vl, else 0 (another rank's
// row; the all-reduce over ranks completes the lookup). out is (N,C), wte_shard is (Vl,C).
void vocab_parallel_embedding_forward(float* out, const int32_t* tokens, const float* wte_shard,
                                      int64_t N, int64_t C, int64_t v0, int64_t Vl);

// dwte_shard[tokens[n] - v0,:] += dout[n,:] for the tokens in this shard.
void vocab_parallel_embedding_backward(float* dwte_shard, const float* dout, const int32_t* tokens,
                                       int64_t N, int64_t C, int64_t v0, int64_t Vl);

// Rows [row0, row0 + rows) of the flattened (B,T) token grid, row n at position (row0 + n) % T:
// out[n,:] += wpe[(row0 + n) % T,:]. out is (rows,C), wpe is (maxT,C).
void position_embedding_forward(float* out, const float* wpe, int64_t row0, int64_t rows, int64_t T,
                                int64_t C);
// dwpe[(row0 + n) % T,:] += dout[n,:]
void position_embedding_backward(float* dwpe, const float* dout, int64_t row0, int64_t rows,
                                 int64_t T, int64_t C);

// logits is (N,Vl), this rank's columns [v0, v0 + Vl) of a vocabulary of V real entries.
// row_max[n] = max over the real columns (-FLT_MAX when the shard is all padding).
void vocab_parallel_ce_max(float* row_max, const float* logits, int64_t N, int64_t Vl, int64_t v0,
                           int64_t V);

// With row_max already reduced over ranks: sums is (2,N): sums[n] = sum over real columns of
// exp(logit - row_max[n]); sums[N + n] = logits[n, targets[n] - v0] if the target is in this
// shard, else 0. Targets < 0 are ignored; a target >= V fails a check.
void vocab_parallel_ce_sums(float* sums, const float* logits, const float* row_max,
                            const int32_t* targets, int64_t N, int64_t Vl, int64_t v0, int64_t V);

// With sums reduced over ranks: lse[n] = row_max[n] + log(sums[n]); losses[n] = lse[n] -
// sums[N + n] (0 for a target < 0).
void vocab_parallel_ce_finish(float* losses, float* lse, const float* row_max, const float* sums,
                              const int32_t* targets, int64_t N);

// dlogits[n,j] = dloss * (exp(logits[n,j] - lse[n]) - [v0 + j == targets[n]]) on real columns,
// 0 on padding and on rows with target < 0. WRITES dlogits (N,Vl), which may alias logits.
void vocab_parallel_ce_backward(float* dlogits, const float* logits, const float* lse,
                                const int32_t* targets, float dloss, int64_t N, int64_t Vl,
                                int64_t v0, int64_t V);

// out[n,:] += bias for each of the N rows: the bias of a row-parallel layer, added once after
// the partial products are summed over ranks. out is (N,OC).
void bias_forward(float* out, const float* bias, int64_t N, int64_t OC);

}  // namespace brigade
