// Conversion to and from Hugging Face's GPT2LMHeadModel. The mapping is checked three
// independent ways: against names and element positions written out by hand, against a naive
// forward pass that uses the HF tensors the way transformers' GPT2 code does (Conv1D computes
// x @ W + b; q, k, v are split along the last axis, heads inside each), and by round trips.
#include "brigade/ckpt/hf_gpt2.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <set>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/tensor/bf16.h"
#include "brigade/tensor/rng.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

using testing::TempDir;
using testing::write_raw;

// Small, with C != T != V and 3C, 4C distinct from everything, so a swapped dimension shows.
const GptConfig kTiny{.vocab = 11, .seq_len = 7, .d_model = 8, .n_layer = 2, .n_head = 2};

// A model whose every parameter holds its own flat index: any misplaced element is visible.
std::unique_ptr<Gpt> indexed_model(const GptConfig& config = kTiny) {
  auto m = std::make_unique<Gpt>(config, 1);
  for (int64_t i = 0; i < m->num_params(); ++i) m->params()[i] = static_cast<float>(i);
  return m;
}

std::map<std::string, HfTensor> by_name(std::vector<HfTensor> tensors) {
  std::map<std::string, HfTensor> out;
  for (auto& t : tensors) out[t.name] = std::move(t);
  return out;
}

// Writes tensors (f32 values, stored as `dtype`) as a safetensors file.
struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
  StDtype dtype = StDtype::kF32;
};
void write_entries(const std::string& path, const std::vector<Entry>& entries) {
  std::vector<std::vector<uint16_t>> halves(entries.size());
  std::vector<StTensorView> views;
  for (size_t k = 0; k < entries.size(); ++k) {
    const Entry& e = entries[k];
    StTensorView v{.name = e.name, .dtype = e.dtype, .shape = e.shape};
    if (e.dtype == StDtype::kBF16) {
      for (float f : e.values) halves[k].push_back(float_to_bf16(f));
      v.data = halves[k].data();
      v.nbytes = static_cast<int64_t>(halves[k].size() * 2);
    } else {
      v.data = e.values.data();
      v.nbytes = static_cast<int64_t>(e.values.size() * st_dtype_size(e.dtype));
    }
    views.push_back(v);
  }
  write_safetensors(path, views);
}

// The HF state dict of `model` as entries, optionally renamed/edited by the caller.
std::vector<Entry> hf_entries(const Gpt& model) {
  std::vector<Entry> out;
  for (auto& t : to_hf_gpt2(model.config(), model.layout(), model.params())) {
    out.push_back({t.name, t.shape, t.data});
  }
  return out;
}

TEST(HfGpt2, NamesShapesAndTransposesMatchAHandWrittenMapping) {
  auto model = indexed_model();
  auto hf = by_name(to_hf_gpt2(kTiny, model->layout(), model->params()));
  const int64_t V = 11, T = 7, C = 8;
  auto ours = [&](const std::string& name) {
    return model->params() + model->layout().at(name).offset;
  };

  std::set<std::string> want = {"transformer.wte.weight", "transformer.wpe.weight",
                                "transformer.ln_f.weight", "transformer.ln_f.bias"};
  for (int l = 0; l < 2; ++l) {
    for (const char* p :
         {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",
          "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"}) {
      want.insert("transformer.h." + std::to_string(l) + "." + p);
    }
  }
  std::set<std::string> got;
  for (auto& [name, t] : hf) got.insert(name);
  EXPECT_EQ(got, want);  // in particular no lm_head.weight: it is tied to wte

  using Shape = std::vector<int64_t>;
  EXPECT_EQ(hf["transformer.wte.weight"].shape, (Shape{V, C}));
  EXPECT_EQ(hf["transformer.wpe.weight"].shape, (Shape{T, C}));
  // Conv1D weights are (in_features, out_features); element [i][o] is our [o][i].
  struct Conv {
    const char* name;
    int64_t in, out;
  };
  for (int l = 0; l < 2; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    for (Conv c : {Conv{"attn.c_attn.weight", C, 3 * C}, Conv{"attn.c_proj.weight", C, C},
                   Conv{"mlp.c_fc.weight", C, 4 * C}, Conv{"mlp.c_proj.weight", 4 * C, C}}) {
      const HfTensor& t = hf["transformer." + h + c.name];
      ASSERT_EQ(t.shape, (Shape{c.in, c.out})) << c.name;
      const float* w = ours(h + c.name);  // ours is (out, in)
      for (int64_t i = 0; i < c.in; ++i) {
        for (int64_t o = 0; o < c.out; ++o) {
          ASSERT_EQ(t.data[i * c.out + o], w[o * c.in + i])
              << h << c.name << " [" << i << "][" << o << "]";
        }
      }
    }
    for (const char* b : {"attn.c_attn.bias", "ln_1.weight", "mlp.c_proj.bias"}) {
      const HfTensor& t = hf["transformer." + h + b];
      const ParamSpec& spec = model->layout().at(h + b);
      EXPECT_EQ(t.shape, spec.shape);
      EXPECT_EQ(0, std::memcmp(t.data.data(), ours(h + b), spec.numel * sizeof(float))) << b;
    }
  }
  EXPECT_EQ(0, std::memcmp(hf["transformer.wte.weight"].data.data(), ours("wte.weight"),
                           V * C * sizeof(float)));
}

// --- An independent GPT-2 forward on HF tensors, as transformers' modeling_gpt2.py computes it.

using Mat = std::vector<double>;  // row-major

Mat layernorm(const Mat& x, int64_t T, int64_t C, const std::vector<float>& w,
              const std::vector<float>& b) {
  Mat y(x.size());
  for (int64_t t = 0; t < T; ++t) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mean += x[t * C + c] / C;
    for (int64_t c = 0; c < C; ++c) var += (x[t * C + c] - mean) * (x[t * C + c] - mean) / C;
    for (int64_t c = 0; c < C; ++c) {
      y[t * C + c] = (x[t * C + c] - mean) / std::sqrt(var + 1e-5) * w[c] + b[c];
    }
  }
  return y;
}

// Conv1D: x (T, in) @ W (in, out) + b.
Mat conv1d(const Mat& x, int64_t T, const HfTensor& W, const HfTensor& b) {
  const int64_t in = W.shape[0], out = W.shape[1];
  Mat y(static_cast<size_t>(T * out));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t o = 0; o < out; ++o) {
      double s = b.data[o];
      for (int64_t i = 0; i < in; ++i) s += x[t * in + i] * W.data[i * out + o];
      y[t * out + o] = s;
    }
  }
  return y;
}

Mat hf_reference_logits(std::map<std::string, HfTensor>& hf, const GptConfig& cfg,
                        const std::vector<int32_t>& tokens) {
  const int64_t T = static_cast<int64_t>(tokens.size()), C = cfg.d_model, V = cfg.vocab;
  const int64_t NH = cfg.n_head, hd = C / NH;
  auto& wte = hf["transformer.wte.weight"].data;
  auto& wpe = hf["transformer.wpe.weight"].data;
  Mat x(static_cast<size_t>(T * C));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < C; ++c) x[t * C + c] = wte[tokens[t] * C + c] + wpe[t * C + c];
  }
  for (int64_t l = 0; l < cfg.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    Mat a = layernorm(x, T, C, hf[p + "ln_1.weight"].data, hf[p + "ln_1.bias"].data);
    Mat qkv = conv1d(a, T, hf[p + "attn.c_attn.weight"], hf[p + "attn.c_attn.bias"]);
    Mat y(static_cast<size_t>(T * C), 0.0);
    for (int64_t h = 0; h < NH; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(static_cast<size_t>(t + 1));
        double mx = -1e300, sum = 0;
        for (int64_t u = 0; u <= t; ++u) {
          double d = 0;
          for (int64_t k = 0; k < hd; ++k) {
            d += qkv[t * 3 * C + h * hd + k] * qkv[u * 3 * C + C + h * hd + k];
          }
          s[u] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[u]);
        }
        for (int64_t u = 0; u <= t; ++u) sum += (s[u] = std::exp(s[u] - mx));
        for (int64_t u = 0; u <= t; ++u) {
          for (int64_t k = 0; k < hd; ++k) {
            y[t * C + h * hd + k] += s[u] / sum * qkv[u * 3 * C + 2 * C + h * hd + k];
          }
        }
      }
    }
    Mat proj = conv1d(y, T, hf[p + "attn.c_proj.weight"], hf[p + "attn.c_proj.bias"]);
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
    Mat m = layernorm(x, T, C, hf[p + "ln_2.weight"].data, hf[p + "ln_2.bias"].data);
    Mat fc = conv1d(m, T, hf[p + "mlp.c_fc.weight"], hf[p + "mlp.c_fc.bias"]);
    for (double& v : fc) {  // "gelu_new"
      v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
    }
    Mat out = conv1d(fc, T, hf[p + "mlp.c_proj.weight"], hf[p + "mlp.c_proj.bias"]);
    for (size_t i = 0; i < x.size(); ++i) x[i] += out[i];
  }
  x = layernorm(x, T, C, hf["transformer.ln_f.weight"].data, hf["transformer.ln_f.bias"].data);
  Mat logits(static_cast<size_t>(T * V));  // lm_head tied to wte
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t v = 0; v < V; ++v) {
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += x[t * C + c] * wte[v * C + c];
      logits[t * V + v] = s;
    }
  }
  return logits;
}

TEST(HfGpt2, HfTensorsComputeOurLogitsUnderHfsGpt2Semantics) {
  Gpt model(kTiny, 1);
  fill_normal(model.params(), model.num_params(), 0.0f, 0.3f, 99, 1);
  std::vector<int32_t> tokens = {3, 10, 0, 7, 7, 2, 9};
  Batch batch{.size = 1, .seq_len = 7, .tokens = tokens, .targets = {}, .features = {}};
  const float* logits = model.forward_logits(batch);
  auto hf = by_name(to_hf_gpt2(kTiny, model.layout(), model.params()));
  Mat ref = hf_reference_logits(hf, kTiny, tokens);
  double max_abs = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(logits[i], ref[i], 2e-4 * (1 + std::fabs(ref[i]))) << "logit " << i;
    max_abs = std::max(max_abs, std::fabs(ref[i]));
  }
  EXPECT_GT(max_abs, 0.1);  // not a vacuous comparison of near-zero values
}

TEST(HfGpt2, SaveAndLoadRoundTripBitForBit) {
  TempDir dir;
  Gpt model(kTiny, 1);
  fill_normal(model.params(), model.num_params(), 0.0f, 1.0f, 7, 2);
  save_hf_gpt2(dir.path(), kTiny, model.layout(), model.params());

  SafetensorsFile file = SafetensorsFile::open(dir / "model.safetensors");
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.names().size(), 4u + 12u * 2u);
  for (const auto& name : file.names()) {
    EXPECT_EQ(name.rfind("transformer.", 0), 0u) << name;
    EXPECT_EQ(file.info(name).dtype, StDtype::kF32) << name;
  }
  EXPECT_FALSE(file.contains("lm_head.weight"));

  GptConfig loaded = load_hf_gpt2_config(dir.path());
  EXPECT_EQ(loaded.vocab, kTiny.vocab);
  EXPECT_EQ(loaded.seq_len, kTiny.seq_len);
  EXPECT_EQ(loaded.d_model, kTiny.d_model);
  EXPECT_EQ(loaded.n_layer, kTiny.n_layer);
  EXPECT_EQ(loaded.n_head, kTiny.n_head);
  Gpt back(loaded, 1);
  load_hf_gpt2_weights(dir.path(), loaded, back.layout(), back.params());
  EXPECT_EQ(0, std::memcmp(back.params(), model.params(), model.num_params() * sizeof(float)));
}

TEST(HfGpt2, ConfigJsonHasGpt2Fields) {
  const GptConfig c{.vocab = 300, .seq_len = 64, .d_model = 48, .n_layer = 3, .n_head = 6};
  nlohmann::json j = hf_gpt2_config_json(c);
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(j["model_type"], "gpt2");
  EXPECT_EQ(j["vocab_size"], 300);
  EXPECT_EQ(j["n_positions"], 64);
  EXPECT_EQ(j["n_ctx"], 64);
  EXPECT_EQ(j["n_embd"], 48);
  EXPECT_EQ(j["n_layer"], 3);
  EXPECT_EQ(j["n_head"], 6);
  EXPECT_TRUE(j["n_inner"].is_null());
  EXPECT_EQ(j["activation_function"], "gelu_new");
  EXPECT_DOUBLE_EQ(j["layer_norm_epsilon"].get<double>(), 1e-5);
  EXPECT_EQ(j["tie_word_embeddings"], true);
  EXPECT_EQ(j["resid_pdrop"], 0.0);
}

TEST(HfGpt2, AcceptsTheOriginalGpt2NamingWithMaskBuffersAndATiedHead) {
  TempDir dir;
  // Stored as BF16, which holds the integers 0..256 exactly.
  auto model = indexed_model();
  for (int64_t i = 0; i < model->num_params(); ++i) {
    model->params()[i] = std::fmod(model->params()[i], 256.0f);
  }
  std::vector<Entry> entries;
  for (Entry e : hf_entries(*model)) {
    e.name = e.name.substr(std::string("transformer.").size());  // "h.0.attn.c_attn.weight"
    e.dtype = StDtype::kBF16;
    entries.push_back(std::move(e));
  }
  for (int l = 0; l < 2; ++l) {
    const std::string h = "h." + std::to_string(l) + ".attn.";
    entries.push_back({h + "bias", {1, 1, 7, 7}, std::vector<float>(49, 1.0f)});
    entries.push_back({h + "masked_bias", {}, {-1e4f}});
  }
  const float* wte = model->params() + model->layout().at("wte.weight").offset;
  entries.push_back({"lm_head.weight", {11, 8}, std::vector<float>(wte, wte + 88)});
  write_entries(dir / "model.safetensors", entries);

  Gpt back(kTiny, 1);
  from_hf_gpt2(SafetensorsFile::open(dir / "model.safetensors"), kTiny, back.layout(),
               back.params());
  EXPECT_EQ(0, std::memcmp(back.params(), model->params(), model->num_params() * sizeof(float)));
}

// Writes `entries` and expects from_hf_gpt2 to throw an IoError naming the file and `needles`.
void expect_rejected(const std::vector<Entry>& entries, const std::vector<std::string>& needles,
                     const GptConfig& config = kTiny) {
  TempDir dir;
  write_entries(dir / "model.safetensors", entries);
  Gpt back(config, 1);
  std::vector<std::string> all = needles;
  all.push_back(dir / "model.safetensors");
  try {
    from_hf_gpt2(SafetensorsFile::open(dir / "model.safetensors"), config, back.layout(),
                 back.params());
    ADD_FAILURE() << "accepted; expected an error naming " << needles.front();
  } catch (const IoError& e) {
    for (const auto& n : all) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " lacks " << n;
    }
  }
}

TEST(HfGpt2, MalformedWeightsAreRejectedNamingTheTensor) {
  auto model = indexed_model();
  const auto good = hf_entries(*model);
  auto edit = [&](auto fn) {
    auto e = good;
    fn(e);
    return e;
  };
  auto find = [](std::vector<Entry>& e, const std::string& name) -> Entry& {
    for (auto& x : e) {
      if (x.name == name) return x;
    }
    throw std::runtime_error("no " + name);
  };
  // Missing tensor.
  expect_rejected(edit([&](auto& e) { e.erase(e.begin() + 20); }),
                  {"missing tensor", good[20].name});
  // Our (out, in) layout instead of HF's (in, out).
  expect_rejected(edit([&](auto& e) {
                    find(e, "transformer.h.1.mlp.c_fc.weight").shape = {32, 8};
                  }),
                  {"transformer.h.1.mlp.c_fc.weight", "(32, 8)", "(8, 32)"});
  // Unknown tensors: a layer beyond n_layer, a classification head.
  expect_rejected(edit([&](auto& e) {
                    e.push_back({"transformer.h.2.ln_1.weight", {8}, std::vector<float>(8)});
                  }),
                  {"unknown tensor", "transformer.h.2.ln_1.weight"});
  expect_rejected(edit([&](auto& e) {
                    e.push_back({"score.weight", {2, 8}, std::vector<float>(16)});
                  }),
                  {"unknown tensor", "score.weight"});
  // The same parameter under both naming variants.
  expect_rejected(edit([&](auto& e) {
                    Entry dup = find(e, "transformer.ln_f.bias");
                    dup.name = "ln_f.bias";
                    e.push_back(dup);
                  }),
                  {"ln_f.bias", "transformer.ln_f.bias", "same parameter"});
  // An integer dtype.
  expect_rejected(edit([&](auto& e) {
                    Entry& b = find(e, "transformer.h.0.ln_2.bias");
                    b.dtype = StDtype::kI32;
                  }),
                  {"transformer.h.0.ln_2.bias", "I32"});
  // An untied head.
  expect_rejected(edit([&](auto& e) {
                    std::vector<float> head(88, 0.5f);
                    e.push_back({"lm_head.weight", {11, 8}, head});
                  }),
                  {"lm_head.weight", "untied"});
  // Weights of another architecture than config.json's (n_embd 16 in the file's config).
  const GptConfig wider{.vocab = 11, .seq_len = 7, .d_model = 16, .n_layer = 2, .n_head = 2};
  expect_rejected(good, {"transformer.wte.weight", "(11, 8)", "(11, 16)"}, wider);
}

TEST(HfGpt2, UnsupportedOrMalformedConfigJsonIsRejected) {
  const nlohmann::json good = hf_gpt2_config_json(kTiny);
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json j = good;
    if (value.is_discarded()) {
      j.erase(key);
    } else {
      j[key] = value;
    }
    return j;
  };
  const std::string path = "/some/config.json";
  EXPECT_THROW_WITH(
      gpt_config_from_hf(with("vocab_size", nlohmann::json::value_t::discarded), path), IoError,
      path, "vocab_size");
  EXPECT_THROW_WITH(gpt_config_from_hf(with("n_embd", "8"), path), IoError, path, "n_embd");
  EXPECT_THROW_WITH(gpt_config_from_hf(with("n_head", 3), path), ConfigError, path, "n_head = 3");
  EXPECT_THROW_WITH(gpt_config_from_hf(with("activation_function", "relu"), path), ConfigError,
                    path, "activation_function", "relu");
  EXPECT_THROW_WITH(gpt_config_from_hf(with("n_inner", 24), path), ConfigError, "n_inner = 24");
  EXPECT_THROW_WITH(gpt_config_from_hf(with("tie_word_embeddings", false), path), ConfigError,
                    "tie_word_embeddings");
  EXPECT_THROW_WITH(gpt_config_from_hf(with("layer_norm_epsilon", 1e-6), path), ConfigError,
                    "layer_norm_epsilon");
  EXPECT_THROW_WITH(gpt_config_from_hf(with("model_type", "llama"), path), ConfigError, "llama");
  // HF's defaults for absent optional keys are GPT-2's: the minimal config is accepted.
  nlohmann::json minimal = {
      {"vocab_size", 11}, {"n_positions", 7}, {"n_embd", 8}, {"n_layer", 2}, {"n_head", 2}};
  EXPECT_EQ(gpt_config_from_hf(minimal, path).d_model, 8);
  EXPECT_EQ(gpt_config_from_hf(with("n_inner", 32), path).d_model, 8);

  TempDir dir;
  write_raw(dir / "config.json", "{not json");
  EXPECT_THROW_WITH(load_hf_gpt2_config(dir.path()), IoError, dir / "config.json", "JSON");
}

TEST(HfGpt2, FoldersWithoutASingleSafetensorsFileSayWhy) {
  TempDir dir;
  Gpt model(kTiny, 1);
  EXPECT_THROW_WITH(load_hf_gpt2_config(dir.path()), IoError, dir / "config.json");
  write_raw(dir / "pytorch_model.bin", "x");
  EXPECT_THROW_WITH(load_hf_gpt2_weights(dir.path(), kTiny, model.layout(), model.params()),
                    IoError, "pytorch_model.bin");
  write_raw(dir / "model.safetensors.index.json", "{}");
  EXPECT_THROW_WITH(load_hf_gpt2_weights(dir.path(), kTiny, model.layout(), model.params()),
                    IoError, "sharded");
}

}  // namespace
}  // namespace brigade
