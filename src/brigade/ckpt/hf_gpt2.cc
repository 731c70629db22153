// Renaming and transposing between our GPT parameters and HF's GPT2LMHeadModel state dict (the
// table is in hf_gpt2.h). Reading trusts nothing: the set of names, every shape and every dtype
// are checked against what config.json's architecture implies before any data is read.
#include "brigade/ckpt/hf_gpt2.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string_view>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/base/json_limits.h"

namespace brigade {

namespace {

constexpr std::string_view kPrefix = "transformer.";
constexpr std::string_view kLmHead = "lm_head.weight";
constexpr int64_t kMaxHfConfigBytes = int64_t{1} << 24;

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

constexpr std::string_view kMoeModelType = "brigade_gpt2_moe";

// The Conv1D weights of a block (and of each expert, stored like the dense MLP it replaces),
// which HF's GPT-2 stores as (in_features, out_features). The router is an nn.Linear (E, C),
// as Mixtral's gate.
bool is_conv1d_weight(std::string_view name) {
  return ends_with(name, ".c_attn.weight") || ends_with(name, ".c_proj.weight") ||
         ends_with(name, ".c_fc.weight");
}

// "experts.<e>.<rest>" -> e (and rest), or -1.
int64_t expert_index(std::string_view name, std::string_view* rest) {
  constexpr std::string_view kExperts = "mlp.experts.";
  if (!starts_with(name, kExperts)) return -1;
  size_t i = kExperts.size();
  int64_t e = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i < kExperts.size() + 9) {
    e = e * 10 + (name[i] - '0');
    ++i;
  }
  if (i == kExperts.size() || i >= name.size() || name[i] != '.') return -1;
  if (rest) *rest = name.substr(i + 1);
  return e;
}

// A required number of config.json (finite), for the MoE keys.
double finite_number(const nlohmann::json& j, const char* key, const std::string& path) {
  if (!j.contains(key)) throw IoError(fmt::format("{}: missing \"{}\"", path, key));
  const auto& v = j.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) {
    throw IoError(
        fmt::format("{}: \"{}\" = {}: must be a finite number", path, key, json_excerpt(v)));
  }
  return v.get<double>();
}

// The block index of "h.<i>.<rest>" (our name, or an HF name with the prefix stripped), or -1.
int64_t block_index(std::string_view name, std::string_view* rest) {
  if (!starts_with(name, "h.")) return -1;
  size_t i = 2;
  int64_t index = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i < 12) {
    index = index * 10 + (name[i] - '0');
    ++i;
  }
  if (i == 2 || i >= name.size() || name[i] != '.') return -1;
  if (rest) *rest = name.substr(i + 1);
  return index;
}

// GPT-2's causal-mask buffers (h.<i>.attn.bias, h.<i>.attn.masked_bias): constants, not weights.
bool is_mask_buffer(std::string_view unprefixed, int64_t n_layer) {
  std::string_view rest;
  int64_t l = block_index(unprefixed, &rest);
  return l >= 0 && l < n_layer && (rest == "attn.bias" || rest == "attn.masked_bias");
}

// out (cols, rows) = in (rows, cols) transposed.
void transpose(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
  }
}

// A required positive integer of config.json.
int64_t positive_int(const nlohmann::json& j, const char* key, const std::string& path) {
  if (!j.contains(key)) throw IoError(fmt::format("{}: missing \"{}\"", path, key));
  const auto& v = j.at(key);
  if (!v.is_number_integer()) {
    throw IoError(fmt::format("{}: \"{}\" = {}: must be an integer", path, key, json_excerpt(v)));
  }
  int64_t n = v.get<int64_t>();
  if (n <= 0) throw ConfigError(fmt::format("{}: {} = {}: must be > 0", path, key, n));
  return n;
}

// An optional boolean of config.json that must have the value GPT-2 (and we) use.
void require_bool(const nlohmann::json& j, const char* key, bool wanted, const std::string& path) {
  if (!j.contains(key) || j.at(key).is_null()) return;
  const auto& v = j.at(key);
  if (!v.is_boolean()) {
    throw IoError(
        fmt::format("{}: \"{}\" = {}: must be true or false", path, key, json_excerpt(v)));
  }
  if (v.get<bool>() != wanted) {
    throw ConfigError(fmt::format("{}: {} = {}: brigade's GPT supports only {}", path, key,
                                  json_excerpt(v), wanted));
  }
}

std::string dtype_list() {
  return "F32, F16 or BF16";
}

}  // namespace

HfName hf_gpt2_name(const ParamSpec& spec) {
  static const char* const kBlockParams[] = {
      "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
      "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  static const char* const kExpertParams[] = {"c_fc.weight", "c_fc.bias", "c_proj.weight",
                                              "c_proj.bias"};
  std::string_view rest, expert_rest;
  bool known = spec.name == "wte.weight" || spec.name == "wpe.weight" ||
               spec.name == "ln_f.weight" || spec.name == "ln_f.bias";
  if (!known && block_index(spec.name, &rest) >= 0) {
    for (const char* p : kBlockParams) known = known || rest == p;
    known = known || rest == "mlp.router.weight";
    if (expert_index(rest, &expert_rest) >= 0) {
      for (const char* p : kExpertParams) known = known || expert_rest == p;
    }
  }
  if (!known) {
    throw ConfigError(
        fmt::format("parameter '{}' has no counterpart in GPT2LMHeadModel", spec.name));
  }
  HfName h{.name = std::string(kPrefix) + spec.name, .shape = spec.shape, .transposed = false};
  if (is_conv1d_weight(spec.name)) {
    BRIGADE_CHECK(spec.shape.size() == 2) << spec.name << " " << shape_string(spec.shape);
    h.shape = {spec.shape[1], spec.shape[0]};
    h.transposed = true;
  }
  return h;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> hf_gpt2_expected_tensors(
    const GptConfig& c) {
  const int64_t V = c.vocab, T = c.seq_len, C = c.d_model;
  const std::string t(kPrefix);
  std::vector<std::pair<std::string, std::vector<int64_t>>> out = {{t + "wte.weight", {V, C}},
                                                                   {t + "wpe.weight", {T, C}}};
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string h = t + "h." + std::to_string(l) + ".";
    out.push_back({h + "ln_1.weight", {C}});
    out.push_back({h + "ln_1.bias", {C}});
    out.push_back({h + "attn.c_attn.weight", {C, 3 * C}});
    out.push_back({h + "attn.c_attn.bias", {3 * C}});
    out.push_back({h + "attn.c_proj.weight", {C, C}});
    out.push_back({h + "attn.c_proj.bias", {C}});
    out.push_back({h + "ln_2.weight", {C}});
    out.push_back({h + "ln_2.bias", {C}});
    if (c.moe_block(l)) {
      out.push_back({h + "mlp.router.weight", {c.n_experts, C}});
      for (int64_t e = 0; e < c.n_experts; ++e) {
        const std::string x = h + "mlp.experts." + std::to_string(e) + ".";
        out.push_back({x + "c_fc.weight", {C, 4 * C}});
        out.push_back({x + "c_fc.bias", {4 * C}});
        out.push_back({x + "c_proj.weight", {4 * C, C}});
        out.push_back({x + "c_proj.bias", {C}});
      }
      continue;
    }
    out.push_back({h + "mlp.c_fc.weight", {C, 4 * C}});
    out.push_back({h + "mlp.c_fc.bias", {4 * C}});
    out.push_back({h + "mlp.c_proj.weight", {4 * C, C}});
    out.push_back({h + "mlp.c_proj.bias", {C}});
  }
  out.push_back({t + "ln_f.weight", {C}});
  out.push_back({t + "ln_f.bias", {C}});
  return out;
}

std::vector<HfTensor> to_hf_gpt2(const GptConfig& config, const ParamLayout& layout,
                                 const float* params) {
  std::map<std::string, std::vector<int64_t>> expected;
  for (auto& [name, shape] : hf_gpt2_expected_tensors(config)) expected[name] = shape;
  BRIGADE_CHECK(layout.specs().size() == expected.size())
      << layout.specs().size() << " parameters, GPT-2 has " << expected.size();
  std::vector<HfTensor> out;
  for (const ParamSpec& spec : layout.specs()) {
    HfName h = hf_gpt2_name(spec);
    auto it = expected.find(h.name);
    BRIGADE_CHECK(it != expected.end() && it->second == h.shape)
        << spec.name << " -> " << h.name << " " << shape_string(h.shape);
    expected.erase(it);  // each HF tensor once
    HfTensor t{.name = h.name, .shape = h.shape, .data = std::vector<float>(spec.numel)};
    const float* src = params + spec.offset;
    if (h.transposed) {
      transpose(src, t.data.data(), spec.shape[0], spec.shape[1]);
    } else {
      std::copy(src, src + spec.numel, t.data.begin());
    }
    out.push_back(std::move(t));
  }
  return out;
}

nlohmann::json hf_gpt2_config_json(const GptConfig& c) {
  nlohmann::json j = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", c.vocab},
      {"n_positions", c.seq_len},
      {"n_ctx", c.seq_len},
      {"n_embd", c.d_model},
      {"n_layer", c.n_layer},
      {"n_head", c.n_head},
      {"n_inner", nullptr},  // 4 * n_embd
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", 1e-5},
      {"initializer_range", 0.02},
      // We train without dropout; HF's defaults (0.1) would change fine-tuning behaviour.
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"tie_word_embeddings", true},
      {"use_cache", true},
      // Our tokenizers have no special tokens; HF would otherwise default both to 50256.
      {"bos_token_id", nullptr},
      {"eos_token_id", nullptr},
      {"torch_dtype", "float32"},
  };
  if (c.moe()) {
    // transformers has no GPT-2 with experts: a model type of our own makes it refuse the
    // folder loudly instead of loading a GPT-2 without its MLPs. The keys follow Mixtral's.
    j["model_type"] = kMoeModelType;
    j["architectures"] = {"BrigadeGPT2MoEForCausalLM"};
    j["num_local_experts"] = c.n_experts;
    j["num_experts_per_tok"] = c.moe_top_k;
    j["moe_every"] = c.moe_every;
    j["capacity_factor"] = c.capacity_factor;
    j["router_aux_loss_coef"] = c.aux_loss_coef;
  }
  return j;
}

GptConfig gpt_config_from_hf(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw IoError(fmt::format("{}: not a JSON object", path));
  const bool moe = j.contains("model_type") && j.at("model_type") == kMoeModelType;
  if (j.contains("model_type") && j.at("model_type") != "gpt2" && !moe) {
    throw ConfigError(
        fmt::format("{}: model_type = {}: brigade imports \"gpt2\" (and its own "
                    "\"{}\")",
                    path, json_excerpt(j.at("model_type")), kMoeModelType));
  }
  GptConfig c;
  c.vocab = positive_int(j, "vocab_size", path);
  c.seq_len = positive_int(j, "n_positions", path);
  c.d_model = positive_int(j, "n_embd", path);
  c.n_layer = positive_int(j, "n_layer", path);
  c.n_head = positive_int(j, "n_head", path);
  if (c.d_model % c.n_head != 0) {
    throw ConfigError(
        fmt::format("{}: n_head = {}: must divide n_embd = {}", path, c.n_head, c.d_model));
  }
  if (j.contains("n_inner") && !j.at("n_inner").is_null() &&
      j.at("n_inner") != nlohmann::json(4 * c.d_model)) {
    throw ConfigError(fmt::format("{}: n_inner = {}: brigade's MLP width is 4 * n_embd = {}", path,
                                  json_excerpt(j.at("n_inner")), 4 * c.d_model));
  }
  if (j.contains("activation_function")) {
    const auto& a = j.at("activation_function");
    if (a != "gelu_new" && a != "gelu_pytorch_tanh") {
      throw ConfigError(
          fmt::format("{}: activation_function = {}: brigade's GPT uses the tanh "
                      "GELU (\"gelu_new\" or \"gelu_pytorch_tanh\")",
                      path, json_excerpt(a)));
    }
  }
  if (j.contains("layer_norm_epsilon")) {
    const auto& e = j.at("layer_norm_epsilon");
    // Written so that NaN fails the comparison and is refused.
    if (!e.is_number() || !(std::fabs(e.get<double>() - 1e-5) <= 1e-11)) {
      throw ConfigError(fmt::format("{}: layer_norm_epsilon = {}: brigade's LayerNorm uses 1e-5",
                                    path, json_excerpt(e)));
    }
  }
  require_bool(j, "tie_word_embeddings", true, path);
  require_bool(j, "scale_attn_weights", true, path);
  require_bool(j, "scale_attn_by_inverse_layer_idx", false, path);
  require_bool(j, "add_cross_attention", false, path);
  if (moe) {
    c.n_experts = positive_int(j, "num_local_experts", path);
    const int64_t k = positive_int(j, "num_experts_per_tok", path);
    if (k > 2) {
      throw ConfigError(fmt::format("{}: num_experts_per_tok = {}: must be 1 or 2", path, k));
    }
    c.moe_top_k = static_cast<int>(k);
    c.moe_every = positive_int(j, "moe_every", path);
    c.capacity_factor = finite_number(j, "capacity_factor", path);
    c.aux_loss_coef = finite_number(j, "router_aux_loss_coef", path);
    try {
      c.validate();
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}: {}", path, e.what()));
    }
  }
  return c;
}

void from_hf_gpt2(const SafetensorsFile& file, const GptConfig& config, const ParamLayout& layout,
                  float* params) {
  const std::string& path = file.path();
  const auto expected_list = hf_gpt2_expected_tensors(config);
  const std::map<std::string, std::vector<int64_t>> expected(expected_list.begin(),
                                                             expected_list.end());
  auto check_dtype = [&](const std::string& name) {
    StDtype d = file.info(name).dtype;
    if (d != StDtype::kF32 && d != StDtype::kF16 && d != StDtype::kBF16) {
      throw IoError(fmt::format("{}: tensor '{}' has dtype {}; expected {}", path, name,
                                st_dtype_name(d), dtype_list()));
    }
  };

  // Pass 1: every name in the file is accounted for, before any data is read.
  std::map<std::string, std::string> found;  // HF name with prefix -> name in the file
  std::string lm_head;
  for (const std::string& name : file.names()) {
    if (name == kLmHead) {
      lm_head = name;
      continue;
    }
    const std::string unprefixed = starts_with(name, kPrefix) ? name.substr(kPrefix.size()) : name;
    if (is_mask_buffer(unprefixed, config.n_layer)) continue;
    const std::string key = std::string(kPrefix) + unprefixed;
    auto it = expected.find(key);
    if (it == expected.end()) {
      throw IoError(fmt::format(
          "{}: unknown tensor '{}': not part of a GPT2LMHeadModel with n_layer = {} (expected "
          "names like 'transformer.h.0.attn.c_attn.weight')",
          path, name, config.n_layer));
    }
    if (auto dup = found.find(key); dup != found.end()) {
      throw IoError(
          fmt::format("{}: tensors '{}' and '{}' are the same parameter", path, dup->second, name));
    }
    check_dtype(name);
    found[key] = name;
  }
  // Then every expected tensor, in forward order (so a wrong architecture shows at wte first).
  for (const auto& [name, shape] : expected_list) {
    auto it = found.find(name);
    if (it == found.end()) {
      throw IoError(fmt::format("{}: missing tensor '{}' (or '{}') of shape {}", path, name,
                                name.substr(kPrefix.size()), shape_string(shape)));
    }
    const auto& stored = file.info(it->second).shape;
    if (stored != shape) {
      throw IoError(
          fmt::format("{}: tensor '{}' has shape {}, expected {} for the architecture "
                      "in config.json",
                      path, it->second, shape_string(stored), shape_string(shape)));
    }
  }

  // Pass 2: read, transposing the Conv1D weights into our (out, in) layout.
  BRIGADE_CHECK(layout.specs().size() == expected.size())
      << layout.specs().size() << " parameters, GPT-2 has " << expected.size();
  std::vector<float> tmp;
  for (const ParamSpec& spec : layout.specs()) {
    HfName h = hf_gpt2_name(spec);
    auto it = found.find(h.name);
    BRIGADE_CHECK(it != found.end() && expected.at(h.name) == h.shape) << spec.name;
    float* dst = params + spec.offset;
    if (h.transposed) {
      tmp.resize(static_cast<size_t>(spec.numel));
      file.read_f32(it->second, tmp.data(), spec.numel);
      transpose(tmp.data(), dst, h.shape[0], h.shape[1]);
    } else {
      file.read_f32(it->second, dst, spec.numel);
    }
  }

  // A stored head must be the tied one: we have no separate output matrix.
  if (!lm_head.empty()) {
    check_dtype(lm_head);
    const std::vector<int64_t> wte_shape = {config.vocab, config.d_model};
    if (file.info(lm_head).shape != wte_shape) {
      throw IoError(fmt::format("{}: tensor '{}' has shape {}, expected {}", path, lm_head,
                                shape_string(file.info(lm_head).shape), shape_string(wte_shape)));
    }
    const ParamSpec& wte = layout.at("wte.weight");
    tmp.resize(static_cast<size_t>(wte.numel));
    file.read_f32(lm_head, tmp.data(), wte.numel);
    if (std::memcmp(tmp.data(), params + wte.offset, sizeof(float) * tmp.size()) != 0) {
      throw IoError(
          fmt::format("{}: tensor '{}' differs from '{}': brigade ties the output head "
                      "to the token embedding and cannot load an untied head",
                      path, lm_head, found.at("transformer.wte.weight")));
    }
  }
}

void save_hf_gpt2(const std::string& dir, const GptConfig& config, const ParamLayout& layout,
                  const float* params, const StMetadata& metadata) {
  std::vector<HfTensor> tensors = to_hf_gpt2(config, layout, params);
  std::vector<StTensorView> views;
  for (const HfTensor& t : tensors) {
    views.push_back({.name = t.name,
                     .dtype = StDtype::kF32,
                     .shape = t.shape,
                     .data = t.data.data(),
                     .nbytes = static_cast<int64_t>(t.data.size() * sizeof(float))});
  }
  StMetadata md = metadata;
  md["format"] = "pt";  // transformers refuses safetensors files without it
  make_dirs(dir);
  const std::string weights = dir + "/" + kHfWeightsFile;
  write_safetensors(weights + ".tmp", views, md);
  rename_atomic(weights + ".tmp", weights);
  write_file_atomic(dir + "/" + kHfConfigFile, hf_gpt2_config_json(config).dump(2) + "\n");
  fsync_dir(dir);
}

GptConfig load_hf_gpt2_config(const std::string& dir) {
  const std::string path = dir + "/" + kHfConfigFile;
  if (!file_exists(path)) {
    throw IoError(fmt::format("{}: not found (a Hugging Face GPT-2 folder holds {} and {})", path,
                              kHfConfigFile, kHfWeightsFile));
  }
  // A config.json is a flat object of a few KiB; bounded so a hostile one cannot crash us.
  const nlohmann::json j = parse_json_bounded(read_file(path, kMaxHfConfigBytes), path,
                                              JsonLimits{.max_bytes = kMaxHfConfigBytes});
  return gpt_config_from_hf(j, path);
}

void load_hf_gpt2_weights(const std::string& dir, const GptConfig& config,
                          const ParamLayout& layout, float* params) {
  const std::string path = dir + "/" + kHfWeightsFile;
  if (!file_exists(path)) {
    if (file_exists(dir + "/model.safetensors.index.json")) {
      throw IoError(
          fmt::format("{}: not found; {} holds a sharded model "
                      "(model.safetensors.index.json), brigade reads one {}",
                      path, dir, kHfWeightsFile));
    }
    if (file_exists(dir + "/pytorch_model.bin")) {
      throw IoError(
          fmt::format("{}: not found; {} holds only pytorch_model.bin, which brigade "
                      "does not read: save the model with safetensors "
                      "(save_pretrained(..., safe_serialization=True))",
                      path, dir));
    }
    throw IoError(fmt::format("{}: not found", path));
  }
  SafetensorsFile file = SafetensorsFile::open(path);
  from_hf_gpt2(file, config, layout, params);
}

}  // namespace brigade
