#pragma once
// A group of expert MLPs, each GPT-2's C -> 4C GELU -> C with biases, applied to the contiguous
// row segments of an expert-major buffer. Saves the pre-activation and GELU output of every row
// for backward; buffers are sized once for max_rows.
#include <cstdint>
#include <vector>

#include "brigade/model/moe/moe_params.h"

namespace brigade {

class ExpertMlps {
 public:
  ExpertMlps(int64_t d_model, int64_t max_rows);

  // in, out are (rows,C); expert j (experts[j]) takes rows [row_begin[j], row_begin[j+1]),
  // rows = row_begin[experts.size()]. WRITES out.
  void forward(float* out, const float* in, const int64_t* row_begin,
               const std::vector<ExpertParams>& experts, const float* params);

  // Backward of the last forward (same in and row_begin): WRITES din (rows,C), accumulates the
  // experts' gradients into grads.
  void backward(float* din, const float* dout, const float* in, const int64_t* row_begin,
                const std::vector<ExpertParams>& experts, const float* params, float* grads);

  int64_t max_rows() const { return max_rows_; }

 private:
  int64_t C_;
  int64_t max_rows_;
  std::vector<float> h_, a_, da_, dh_;  // (max_rows, 4C) each
};

}  // namespace brigade
