#include "brigade/infer/stage_weights.h"

#include <fmt/format.h>

#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/model/gpt_layout.h"

namespace brigade {

StageWeights::StageWeights(const GptConfig& config, int first_layer, int end_layer,
                           const TpContext& tp)
    : config_(config), tp_(tp), first_layer_(first_layer), end_layer_(end_layer) {
  config_.validate();
  BRIGADE_CHECK(!config_.lora() && !config_.moe()) << "stage weights of a plain GPT only";
  if (first_layer < 0 || first_layer >= end_layer || end_layer > config_.n_layer) {
    throw ConfigError(
        fmt::format("pipeline stage of blocks [{}, {}): not a non-empty range of the {} blocks",
                    first_layer, end_layer, config_.n_layer));
  }
  tp_.sequence_parallel = false;
  validate_tensor_parallel(config_, tp_.size(), false);
  shard_ = make_gpt_shard(config_, tp_.size(), tp_.rank());
  // The whole model's layout on this tp rank, of which the stage takes its tensors in order
  // (wte moved behind ln_f on a last stage that is not first, as GptStage does).
  ParamLayout full;
  std::vector<ParamGroup> groups;
  const GptParams fw = build_gpt_layout(config_, shard_, full, groups);
  const auto take = [&](int64_t begin, int64_t end) {
    for (const ParamSpec& s : full.specs()) {
      if (s.offset >= begin && s.offset < end) layout_.add(s);
    }
  };
  const bool first = first_layer == 0, last = end_layer == config_.n_layer;
  if (first) take(fw.wte, fw.blocks.front().begin);  // wte, wpe
  take(fw.blocks[static_cast<size_t>(first_layer)].begin,
       fw.blocks[static_cast<size_t>(end_layer - 1)].end);
  if (last) {
    take(fw.lnf_w, full.total());
    if (!first) take(fw.wte, fw.wpe);
  }
  for (int l = first_layer; l < end_layer; ++l) {
    offsets_.blocks.push_back(block_params_by_name(layout_, config_, l));
  }
  offsets_.wte = first || last ? layout_.at("wte.weight").offset : -1;
  offsets_.wpe = first ? layout_.at("wpe.weight").offset : -1;
  offsets_.lnf_w = last ? layout_.at("ln_f.weight").offset : -1;
  offsets_.lnf_b = last ? layout_.at("ln_f.bias").offset : -1;
  params_.assign(static_cast<size_t>(layout_.total()), 0.0f);
}

DecoderWeights StageWeights::decoder_weights() const {
  return {.config = &config_,
          .shard = shard_,
          .tp = tp_,
          .params = params_.data(),
          .offsets = offsets_,
          .first_layer = first_layer_,
          .end_layer = end_layer_};
}

}  // namespace brigade
