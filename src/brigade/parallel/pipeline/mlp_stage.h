#pragma once
// A pipeline stage made of consecutive layers of the MLP classifier (model/mlp_classifier.h):
// Linear -> GELU per hidden layer, and on the last stage the head Linear with the fused softmax
// cross-entropy. The real stage the executor runs end to end before the GPT is cut into stages.
//
// The backward is split as zero-bubble schedules need it: backward_input computes, layer by
// layer from the top, the gradient w.r.t. each layer's pre-activation (kept in the micro-batch's
// saved buffer) and the input gradient matmul; backward_weight later does the weight-gradient
// matmuls from those and the saved layer inputs.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "brigade/model/pipeline_stage.h"

namespace brigade {

struct MlpStageConfig {
  // widths[0] = input features, widths[1..L-1] the hidden widths, widths[L] = classes: layer i
  // maps widths[i] -> widths[i + 1]; layer L - 1 is the head.
  std::vector<int64_t> widths;
  int first_layer = 0;  // this stage's layers [first_layer, end_layer)
  int end_layer = 0;
  int64_t micro_batch = 1;  // examples per micro-batch
};

// Parameter count of each layer (weight + bias), for balance_layers().
std::vector<int64_t> mlp_layer_params(const std::vector<int64_t>& widths);

class MlpStage : public PipelineStage {
 public:
  explicit MlpStage(const MlpStageConfig& config);

  // This stage's parameters in forward order, per layer weight (out, in) then bias (out): the
  // order and shapes of MlpClassifier's fc.{i}.weight, fc.{i}.bias, ..., head.weight, head.bias
  // for the same layers. Gradients have the same layout and are accumulated (zero them per step).
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  int64_t num_params() const { return static_cast<int64_t>(params_.size()); }
  void zero_grads();

  // The step's global batch: features (m B, widths[0]) read by the first stage, targets (m B)
  // labels in [0, classes) or < 0 (ignored) read by the last. Micro-batch mb is rows
  // [mb B, (mb + 1) B). The last stage counts the valid targets of all m micro-batches, so the
  // summed loss is the mean over the global batch (as the unpipelined model's). Not copied.
  void set_batch(const float* features, const int32_t* targets, int micro_batches);

  bool is_first() const { return first_ == 0; }
  bool is_last() const { return end_ == static_cast<int>(widths_.size()) - 1; }

  int64_t input_floats() const override;
  int64_t output_floats() const override;
  int64_t saved_floats() const override { return saved_floats_; }
  float forward(int mb, const float* input, float* output, float* saved) override;
  void backward_input(int mb, const float* input, const float* dout, float* dinput,
                      float* saved) override;
  void backward_weight(int mb, const float* input, const float* saved) override;

 private:
  struct Layer {
    int64_t in, out;
    int64_t weight, bias;     // offsets in params_ / grads_
    int64_t pre, post, dpre;  // offsets in a saved buffer; -1 when absent
  };
  const float* layer_input(size_t j, int mb, const float* input, const float* saved) const;

  std::vector<int64_t> widths_;
  int first_, end_;
  int64_t B_;
  std::vector<Layer> layers_;  // this stage's layers
  std::vector<float> params_, grads_;
  int64_t saved_floats_ = 0;
  int64_t lse_ = -1;           // offset of the head's log-sum-exp in saved
  std::vector<float> dx_;      // (B, widest): gradient between two layers of this stage
  std::vector<float> losses_;  // (B): per-example losses of the head
  const float* features_ = nullptr;
  const int32_t* targets_ = nullptr;
  float inv_valid_ = 0.0f;  // 1 / valid targets of the global batch
};

}  // namespace brigade
