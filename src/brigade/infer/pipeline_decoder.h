#pragma once
// A decode step over pipeline stages (parallel.pp > 1 in `brigade generate`). Every rank of the
// pipeline group holds one stage's blocks and their key-value cache (model/gpt_decoder.h) and
// runs the same scheduler on the same tokens, so every rank knows each step's segments and
// rows. A step, for R new token rows in S segments:
//
//   stage 0        embeds the tokens, runs its blocks, sends the (R, C) residual stream to 1
//   stage k        receives (R, C) from k - 1, runs its blocks, sends (R, C) to k + 1
//   stage pp - 1   receives, runs its blocks, ln_f and the head, samples S tokens
//   all stages     the S tokens are broadcast from stage pp - 1
//
// so stage 0 can embed them in the next step and every rank agrees on when a sequence stops.
// Under tensor parallelism inside the stages (pp x tp, comm/mesh.h), each tp rank of a stage
// holds the whole (R, C) stream and sends it to the rank of the next stage with its tp
// coordinate: one pipeline group per tp coordinate. Every receive waits at most the
// communicator's timeout (comm.timeout_s), then raises CommError.
//
// Steps run one after the other (the stages take turns; there is no micro-batching of the slots
// across stages yet), so pipeline generation is for a model too large for one process's memory,
// not for speed.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/model/gpt_decoder.h"

namespace brigade {

class PipelineDecoder {
 public:
  // stage: this rank's weights (outlive the decoder); pp: the pipeline group, this rank's stage
  // being its rank there (null or size 1: stage holds the whole model).
  PipelineDecoder(const DecoderWeights& stage, Communicator* pp, int64_t max_slots,
                  int64_t max_rows);

  // (segment index, that segment's logits (vocab floats)) -> the segment's next token.
  using SampleFn = std::function<int32_t(size_t, const float*)>;

  // Collective over the pipeline and tp groups, every rank with the same segments and tokens
  // (the segments' new tokens, concatenated). The last stage calls sample once per segment, in
  // order; every rank gets the sampled tokens in next (segments.size()).
  void step(std::span<const DecodeSegment> segments, const int32_t* tokens, const SampleFn& sample,
            int32_t* next);

 private:
  GptDecoder decoder_;
  Communicator* pp_;  // null at one stage
  int stage_ = 0, stages_ = 1;
  int64_t C_ = 0;
  std::vector<float> input_, output_;  // (max_rows, C): the streams received and sent
};

}  // namespace brigade
