#pragma once
// What the pipeline executor needs from one model chunk (a run of consecutive layers on one
// rank). The executor owns every per-micro-batch buffer and hands them in; the stage owns its
// parameters, gradients and any scratch reused across micro-batches.
//
// Order per micro-batch mb: forward, then backward_input, then backward_weight (the executor runs
// the last two back to back for a fused Backward). Different micro-batches interleave freely, so
// everything a micro-batch's backward needs lives in its `saved` buffer.
#include <cstdint>

namespace brigade {

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;

  // Floats of the activation received per micro-batch (0 on the first stage, which reads its
  // micro-batch from the data), and of the one sent on (0 on the last stage, which ends in the
  // loss). Must equal the neighbouring stage's output / input.
  virtual int64_t input_floats() const = 0;
  virtual int64_t output_floats() const = 0;
  // Floats of the per-micro-batch buffer kept from forward until backward_weight.
  virtual int64_t saved_floats() const = 0;

  // input: the previous stage's output for mb (nullptr on the first stage). Writes output
  // (nullptr on the last stage) and saved. Returns mb's contribution to the step's loss on the
  // last stage (the step's loss is the sum over micro-batches), 0 elsewhere.
  virtual float forward(int mb, const float* input, float* output, float* saved) = 0;

  // dout: d(loss)/d(output) (nullptr on the last stage, which starts from its loss). Writes
  // dinput = d(loss)/d(input) (nullptr on the first stage: not needed) and leaves in saved what
  // backward_weight needs.
  virtual void backward_input(int mb, const float* input, const float* dout, float* dinput,
                              float* saved) = 0;

  // Accumulates (+=) mb's weight gradients from what backward_input left in saved.
  virtual void backward_weight(int mb, const float* input, const float* saved) = 0;
};

}  // namespace brigade
