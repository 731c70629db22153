#pragma once
// The tiny GPT run the CLI tests train (2 layers of width 32 on the fortunes corpus, byte-level
// vocab, a few seconds per run), as TOML text with per-test overrides, so that the tests share
// one definition instead of each carrying a copy.
#include <string>
#include <utility>
#include <vector>

namespace brigade::testing {

// {"section.key", "TOML value"}: replaces the key's value, or adds the key (and its section)
// when the base has none. Values are TOML literals: strings carry their quotes ("\"tiny\"").
using TomlOverrides = std::vector<std::pair<std::string, std::string>>;

inline std::string tiny_gpt_config(const TomlOverrides& overrides = {}) {
  using Section = std::pair<std::string, std::vector<std::pair<std::string, std::string>>>;
  std::vector<Section> toml = {
      {"run", {{"name", "\"tiny\""}, {"seed", "5"}}},
      {"model",
       {{"kind", "\"gpt\""},
        {"vocab", "256"},
        {"seq_len", "32"},
        {"d_model", "32"},
        {"n_layer", "2"},
        {"n_head", "2"}}},
      {"data", {{"source", "\"fortunes\""}}},
      {"train",
       {{"micro_batch", "4"},
        {"steps", "20"},
        {"lr", "3e-3"},
        {"min_lr", "3e-4"},
        {"warmup", "2"},
        {"eval_every", "0"},
        {"eval_batches", "2"},
        {"ckpt_every", "0"},
        {"log_every", "5"}}},
  };
  for (const auto& [path, value] : overrides) {
    const size_t dot = path.find('.');
    const std::string section = path.substr(0, dot), key = path.substr(dot + 1);
    auto s = toml.begin();
    while (s != toml.end() && s->first != section) ++s;
    if (s == toml.end()) s = toml.insert(toml.end(), Section{section, {}});
    auto k = s->second.begin();
    while (k != s->second.end() && k->first != key) ++k;
    if (k == s->second.end()) {
      s->second.emplace_back(key, value);
    } else {
      k->second = value;
    }
  }
  std::string out;
  for (const auto& [section, keys] : toml) {
    out += "[" + section + "]\n";
    for (const auto& [key, value] : keys) out += key + " = " + value + "\n";
  }
  return out;
}

}  // namespace brigade::testing
