#pragma once
// Dispatch and combine: which of this rank's assignments (token n, choice s) are kept under the
// capacity, where each kept one sits in the expert-major row buffer, and the moves between the
// token rows and that buffer.
//
// Row buffer layout: expert 0's rows, then expert 1's, ..., each in priority order (slot 0
// tokens by position, then slot 1). Experts of one ep rank are contiguous (rank p owns experts
// [p E/k, (p+1) E/k)), so the same buffer, cut at rank boundaries, is what all_to_all_v sends.
#include <cstdint>
#include <vector>

#include "brigade/model/moe/moe_config.h"

namespace brigade {

class MoeDispatch {
 public:
  MoeDispatch(const MoeConfig& config, int64_t max_tokens);

  // expert and gate (N,K) from the router; start (E,K) from assignment_starts(); capacity -1
  // for dropless.
  void plan(const int32_t* expert, const float* gate, int64_t N, const int64_t* start,
            int64_t capacity);

  int64_t rows() const { return rows_; }  // kept assignments
  // (E+1): expert e's rows are [row_begin()[e], row_begin()[e+1]).
  const int64_t* row_begin() const { return row_begin_.data(); }
  int32_t row_of(int64_t n, int s) const { return row_of_[n * K_ + s]; }  // -1: dropped
  int64_t dropped() const { return n_ * K_ - rows_; }

  // buf (rows,C): row i is the input of the token it serves.
  void gather(float* buf, const float* x) const;
  // out (N,C) = sum over kept assignments of gate * y[row]; WRITES out (dropped: 0).
  void combine(float* out, const float* y) const;
  // Backward of combine: dgate (N,K) = <dout[n], y[row]> (0 when dropped) and dy (rows,C) =
  // gate * dout[n]. WRITES both.
  void combine_backward(float* dgate, float* dy, const float* dout, const float* y);
  // Backward of gather: dx (N,C) += dbuf[row] for each kept assignment.
  void gather_backward(float* dx, const float* dbuf) const;

 private:
  int64_t C_, E_;
  int K_;
  int64_t max_tokens_;
  int64_t n_ = 0;
  int64_t rows_ = 0;
  std::vector<int32_t> row_of_;     // (N,K)
  std::vector<int32_t> row_token_;  // (rows) token each row serves
  std::vector<int32_t> row_slot_;   // (rows) its choice slot
  std::vector<float> row_gate_;     // (rows)
  std::vector<float> row_dot_;      // (rows) scratch for combine_backward
  std::vector<int64_t> row_begin_;  // (E+1)
  std::vector<int64_t> next_;       // (E,K) scratch: next row per (expert, slot)
  std::vector<int64_t> seen_;       // (E,K) scratch
  std::vector<int64_t> keep_;       // (E,K) scratch
};

}  // namespace brigade
