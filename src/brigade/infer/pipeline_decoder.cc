#include "brigade/infer/pipeline_decoder.h"

#include "brigade/base/check.h"

namespace brigade {

namespace {

// Stage k's residual stream to stage k + 1. One tag: the messages of a pair arrive in order.
constexpr uint32_t kStreamTag = 0x6e01;

}  // namespace

PipelineDecoder::PipelineDecoder(const DecoderWeights& stage, Communicator* pp, int64_t max_slots,
                                 int64_t max_rows)
    : decoder_(stage, max_slots, max_rows),
      pp_(pp && pp->size() > 1 ? pp : nullptr),
      stage_(pp_ ? pp_->rank() : 0),
      stages_(pp_ ? pp_->size() : 1),
      C_(stage.config->d_model) {
  BRIGADE_CHECK(stage.is_first() == (stage_ == 0) && stage.is_last() == (stage_ == stages_ - 1))
      << "pipeline rank " << stage_ << " of " << stages_ << " holds blocks [" << stage.first_layer
      << ", " << stage.end_layer << ") of " << stage.config->n_layer;
  const auto n = static_cast<size_t>(max_rows * C_);
  if (!stage.is_first()) input_.resize(n);
  if (!stage.is_last()) output_.resize(n);
}

void PipelineDecoder::step(std::span<const DecodeSegment> segments, const int32_t* tokens,
                           const SampleFn& sample, int32_t* next) {
  int64_t rows = 0;
  for (const DecodeSegment& s : segments) rows += s.n;
  const int64_t bytes = rows * C_ * static_cast<int64_t>(sizeof(float));
  if (stage_ > 0) pp_->recv(input_.data(), bytes, stage_ - 1, kStreamTag);
  const float* logits = decoder_.stage_step(segments, tokens, input_.data(), output_.data());
  if (stage_ + 1 < stages_) pp_->send(output_.data(), bytes, stage_ + 1, kStreamTag);
  const int64_t V = decoder_.weights().config->vocab;
  if (logits != nullptr) {
    for (size_t k = 0; k < segments.size(); ++k) {
      next[k] = sample(k, logits + static_cast<int64_t>(k) * V);
    }
  }
  if (pp_) {
    pp_->broadcast_bytes(next, static_cast<int64_t>(segments.size() * sizeof(int32_t)),
                         stages_ - 1);
  }
}

}  // namespace brigade
