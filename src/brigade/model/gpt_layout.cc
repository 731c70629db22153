#include "brigade/model/gpt_layout.h"

#include <cmath>
#include <string>

#include "brigade/base/error.h"

namespace brigade {

void validate_tensor_parallel(const GptConfig& c, int tp, bool sequence_parallel) {
  const std::string factor = "parallel.tp = " + std::to_string(tp);
  if (tp < 1) throw ConfigError(factor + ": must be >= 1");
  // Every violated rule in one message, so one fix attempt sees them all.
  std::string why;
  auto require = [&](bool ok, const std::string& what, const char* reason) {
    if (!ok)
      why +=
          (why.empty() ? "" : "; ") + what + " is not divisible by " + factor + " (" + reason + ")";
  };
  require(c.n_head % tp == 0, "model.n_head = " + std::to_string(c.n_head),
          "attention heads are split across tp ranks");
  require((4 * c.d_model) % tp == 0, "4 * model.d_model = " + std::to_string(4 * c.d_model),
          "the MLP hidden features are split");
  if (sequence_parallel)
    require(c.seq_len % tp == 0, "model.seq_len = " + std::to_string(c.seq_len),
            "sequence parallelism splits the token rows");
  if (!why.empty()) throw ConfigError("tensor parallelism: " + why);
}

GptShard make_gpt_shard(const GptConfig& c, int tp_size, int tp_rank) {
  validate_tensor_parallel(c, tp_size, false);
  GptShard s;
  s.tp_size = tp_size;
  s.tp_rank = tp_rank;
  s.vocab_padded = (c.vocab + tp_size - 1) / tp_size * tp_size;
  s.vocab_local = s.vocab_padded / tp_size;
  s.vocab_begin = tp_rank * s.vocab_local;
  s.heads_local = c.n_head / tp_size;
  s.c_local = c.d_model / tp_size;
  s.fc_local = 4 * c.d_model / tp_size;
  return s;
}

GptParams build_gpt_layout(const GptConfig& c, const GptShard& s, ParamLayout& layout,
                           std::vector<ParamGroup>& groups) {
  if (c.moe() && s.tp_size > 1)
    throw ConfigError("model.n_experts = " + std::to_string(c.n_experts) +
                      ": mixture-of-experts blocks do not support tensor parallelism yet "
                      "(parallel.tp = " +
                      std::to_string(s.tp_size) + "); use parallel.tp = 1");
  const int64_t V = c.vocab, T = c.seq_len, C = c.d_model;
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(c.n_layer));
  const auto R = TpSplit::kReplicated, D0 = TpSplit::kDim0, D1 = TpSplit::kDim1;
  // full: the tp = 1 shape; parts: equal blocks of the split dim cut separately (q, k, v).
  // spec.shape is the tp = 1 shape; under tensor parallelism a split tensor keeps this rank's
  // part of it.
  auto add_spec = [&](ParamSpec spec, TpSplit split, int parts) {
    spec.tp_split = split;
    if (s.tp_size > 1 && split != R) {
      std::vector<int64_t> full = spec.shape;
      const size_t dim = split == D0 ? 0 : 1;
      // Round up to a multiple of tp: only the vocab needs it (the rest is validated).
      const int64_t per = (full[dim] / parts + s.tp_size - 1) / s.tp_size;
      spec.shape[dim] = per * parts;
      spec.full_shape = std::move(full);
      spec.tp_rank = s.tp_rank;
      spec.tp_size = s.tp_size;
      spec.tp_parts = parts;
    }
    return layout.add(std::move(spec));
  };
  auto add = [&](const std::string& name, std::vector<int64_t> full, Init init, float std,
                 bool decay, TpSplit split, int parts) {
    return add_spec(ParamSpec{.name = name,
                              .shape = std::move(full),
                              .init = init,
                              .init_std = std,
                              .weight_decay = decay},
                    split, parts);
  };
  auto weight = [&](const std::string& name, std::vector<int64_t> full, float std, TpSplit split,
                    int parts = 1) {
    return add(name, std::move(full), Init::kNormal, std, true, split, parts);
  };
  auto vec = [&](const std::string& name, int64_t n, Init init, TpSplit split, int parts = 1) {
    return add(name, {n}, init, 0.0f, false, split, parts);
  };

  // An adapter of layer `layer` (out, in) when lora_targets has `bit`. Under tensor parallelism
  // it is cut as its layer: a column-parallel layer's B takes the layer's rows (in the same
  // parts), a row-parallel layer's A takes its columns; the other factor is replicated
  // (model/lora.h says what that costs in communication).
  auto adapter = [&](const std::string& layer, unsigned bit, int64_t out, int64_t in,
                     int parts = 1) {
    LoraParams a;
    if (!(c.lora_targets & bit) || !c.lora()) return a;
    a.row_parallel = lora_row_parallel(bit);
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    a.a = add_spec({.name = layer + ".lora_A.weight",
                    .shape = {c.lora_rank, in},
                    .init = Init::kUniform,
                    .init_bound = bound},
                   a.row_parallel ? D1 : R, 1);
    a.b = add_spec(
        {.name = layer + ".lora_B.weight", .shape = {out, c.lora_rank}, .init = Init::kZeros},
        a.row_parallel ? R : D0, parts);
    return a;
  };

  GptParams p;
  p.wte = weight("wte.weight", {V, C}, 0.02f, D0);
  p.wpe = weight("wpe.weight", {T, C}, 0.02f, R);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    GptBlockParams b;
    b.ln1_w = vec(h + "ln_1.weight", C, Init::kOnes, R);
    b.begin = b.ln1_w;
    b.ln1_b = vec(h + "ln_1.bias", C, Init::kZeros, R);
    b.attn_w = weight(h + "attn.c_attn.weight", {3 * C, C}, 0.02f, D0, 3);
    b.attn_b = vec(h + "attn.c_attn.bias", 3 * C, Init::kZeros, D0, 3);
    b.attn_proj_w = weight(h + "attn.c_proj.weight", {C, C}, proj_std, D1);
    b.attn_proj_b = vec(h + "attn.c_proj.bias", C, Init::kZeros, R);
    b.lora_attn = adapter(h + "attn.c_attn", kLoraAttn, 3 * C, C, 3);
    b.lora_attn_proj = adapter(h + "attn.c_proj", kLoraAttnProj, C, C);
    b.ln2_w = vec(h + "ln_2.weight", C, Init::kOnes, R);
    b.ln2_b = vec(h + "ln_2.bias", C, Init::kZeros, R);
    if (c.moe_block(l)) {
      // Replaces mlp.c_fc / mlp.c_proj; the block range still ends after the MLP.
      b.is_moe = true;
      b.fc_w = b.fc_b = b.fc_proj_w = b.fc_proj_b = -1;
      b.moe = add_moe_params(layout, h + "mlp.", c.moe_config(), 0, c.n_experts, proj_std);
      b.end = layout.total();
      p.blocks.push_back(b);
      continue;
    }
    b.fc_w = weight(h + "mlp.c_fc.weight", {4 * C, C}, 0.02f, D0);
    b.fc_b = vec(h + "mlp.c_fc.bias", 4 * C, Init::kZeros, D0);
    b.fc_proj_w = weight(h + "mlp.c_proj.weight", {C, 4 * C}, proj_std, D1);
    b.fc_proj_b = vec(h + "mlp.c_proj.bias", C, Init::kZeros, R);
    b.lora_fc = adapter(h + "mlp.c_fc", kLoraFc, 4 * C, C);
    b.lora_fc_proj = adapter(h + "mlp.c_proj", kLoraFcProj, C, 4 * C);
    b.end = layout.total();
    p.blocks.push_back(b);
  }
  p.lnf_w = vec("ln_f.weight", C, Init::kOnes, R);
  p.lnf_b = vec("ln_f.bias", C, Init::kZeros, R);

  // Layer groups for sharded parameters (ZeRO-3): embeddings, each block, ln_f.
  groups.push_back({p.wte, p.blocks.front().begin});
  for (const GptBlockParams& b : p.blocks) groups.push_back({b.begin, b.end});
  groups.push_back({p.lnf_w, layout.total()});
  return p;
}

GptBlockParams block_params_by_name(const ParamLayout& layout, const GptConfig& c, int64_t l,
                                    int64_t e0, int64_t e1) {
  const std::string h = "h." + std::to_string(l) + ".";
  const auto at = [&](const std::string& name) { return layout.at(h + name).offset; };
  const auto end_of = [&](const std::string& name) {
    const ParamSpec& s = layout.at(h + name);
    return s.offset + s.numel;
  };
  GptBlockParams b;
  b.ln1_w = at("ln_1.weight");
  b.begin = b.ln1_w;
  b.ln1_b = at("ln_1.bias");
  b.attn_w = at("attn.c_attn.weight");
  b.attn_b = at("attn.c_attn.bias");
  b.attn_proj_w = at("attn.c_proj.weight");
  b.attn_proj_b = at("attn.c_proj.bias");
  b.ln2_w = at("ln_2.weight");
  b.ln2_b = at("ln_2.bias");
  const auto adapter = [&](const std::string& layer, unsigned bit) {
    LoraParams a;
    if (c.lora() && (c.lora_targets & bit)) {
      a.a = at(layer + ".lora_A.weight");
      a.b = at(layer + ".lora_B.weight");
      a.row_parallel = lora_row_parallel(bit);
    }
    return a;
  };
  b.lora_attn = adapter("attn.c_attn", kLoraAttn);
  b.lora_attn_proj = adapter("attn.c_proj", kLoraAttnProj);
  if (!c.moe_block(l)) {
    b.fc_w = at("mlp.c_fc.weight");
    b.fc_b = at("mlp.c_fc.bias");
    b.fc_proj_w = at("mlp.c_proj.weight");
    b.fc_proj_b = at("mlp.c_proj.bias");
    b.lora_fc = adapter("mlp.c_fc", kLoraFc);
    b.lora_fc_proj = adapter("mlp.c_proj", kLoraFcProj);
    b.end = b.lora_fc_proj.on()
                ? end_of("mlp.c_proj.lora_B.weight")
                : (b.lora_fc.on() ? end_of("mlp.c_fc.lora_B.weight") : end_of("mlp.c_proj.bias"));
    return b;
  }
  b.is_moe = true;
  b.fc_w = b.fc_b = b.fc_proj_w = b.fc_proj_b = -1;
  MoeParams& m = b.moe;
  m.router_w = at("mlp.router.weight");
  m.begin = m.router_w;
  m.expert_begin = e0;
  m.expert_end = e1;
  m.experts_begin = end_of("mlp.router.weight");
  m.end = m.experts_begin;
  for (int64_t e = e0; e < e1; ++e) {
    const std::string x = "mlp.experts." + std::to_string(e) + ".";
    m.experts.push_back({.fc_w = at(x + "c_fc.weight"),
                         .fc_b = at(x + "c_fc.bias"),
                         .proj_w = at(x + "c_proj.weight"),
                         .proj_b = at(x + "c_proj.bias")});
    m.end = end_of(x + "c_proj.bias");
  }
  b.end = m.end;
  return b;
}

}  // namespace brigade
