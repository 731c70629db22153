#include "brigade/infer/stage_weights.h"

#include <fmt/format.h>

#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/model/gpt_layout.h"

namespace brigade {

namespace {

// Block l's offsets in a layout that holds its tensors under their GPT-2 names.
GptBlockParams dense_block_params(const ParamLayout& layout, int l) {
  const std::string h = "h." + std::to_string(l) + ".";
  const auto at = [&](const char* name) { return layout.at(h + name).offset; };
  GptBlockParams b{};
  b.ln1_w = at("ln_1.weight");
  b.ln1_b = at("ln_1.bias");
  b.attn_w = at("attn.c_attn.weight");
  b.attn_b = at("attn.c_attn.bias");
  b.attn_proj_w = at("attn.c_proj.weight");
  b.attn_proj_b = at("attn.c_proj.bias");
  b.ln2_w = at("ln_2.weight");
  b.ln2_b = at("ln_2.bias");
  b.fc_w = at("mlp.c_fc.weight");
  b.fc_b = at("mlp.c_fc.bias");
  b.fc_proj_w = at("mlp.c_proj.weight");
  b.fc_proj_b = at("mlp.c_proj.bias");
  b.begin = b.ln1_w;
  const ParamSpec& last = layout.at(h + "mlp.c_proj.bias");
  b.end = last.offset + last.numel;
  return b;
}

}  // namespace

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
    offsets_.blocks.push_back(dense_block_params(layout_, l));
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
