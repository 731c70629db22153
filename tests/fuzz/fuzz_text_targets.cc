// Targets for the text formats: TOML configs (file and --set), HF config.json, BPE merges.
#include <filesystem>
#include <stdexcept>

#include "brigade/ckpt/hf_gpt2.h"
#include "brigade/data/bpe.h"
#include "brigade/runtime/config.h"
#include "fuzz/fuzz_target.h"

namespace brigade::fuzz {

namespace {

// A config file as `brigade train <file>` reads it: load_config (regular file, size bound,
// TOML pre-scan, toml11) and validate().
class ConfigTarget final : public Target {
 public:
  explicit ConfigTarget(const std::string& dir) : path_(dir + "/fuzz.toml") {}

  std::vector<std::string> seeds() override {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(BRIGADE_SOURCE_DIR "/configs")) {
      if (e.path().extension() == ".toml") out.push_back(read_scratch(e.path().string()));
    }
    out.push_back(Config{}.to_toml());  // every key, as the run folder's config.toml has it
    return out;
  }

  Outcome run(std::string_view input) override {
    write_scratch(path_, input);
    load_config(path_).validate();
    return {};
  }

  std::string names() const override { return "fuzz.toml"; }

  // validate() names the key ("train.lr = nan: ..."), which is where to look in any file.
  bool locates(std::string_view message) const override {
    for (const char* s : {"run.", "model.", "data.", "train.", "parallel.", "sync.", "ps.", "fed.",
                          "comm.", "monitor.", "lora."}) {
      if (message.substr(0, std::string_view(s).size()) == s) return true;
    }
    return false;
  }

 private:
  std::string path_;
};

// `--set section.key=value` overrides on top of the defaults.
class ConfigSetTarget final : public Target {
 public:
  std::vector<std::string> seeds() override {
    return {"train.lr=3e-4",
            "model.hidden=[64, 32]",
            "run.name=\"x\"",
            "sync.method=diloco",
            "model.n_experts=8",
            "train.nesterov=true",
            "data.path=/tmp/shards",
            "comm.timeout_s=1.5",
            "parallel.layer_split=[1, 3]",
            "lora.rank=4"};
  }

  Outcome run(std::string_view input) override {
    parse_config("", "fuzz.toml", {std::string(input)}).validate();
    return {};
  }
};

// config.json of a Hugging Face GPT-2 folder, as `brigade import` reads it.
class HfConfigTarget final : public Target {
 public:
  explicit HfConfigTarget(const std::string& dir) : dir_(dir) {}

  std::vector<std::string> seeds() override {
    GptConfig c;
    c.vocab = 300;
    c.seq_len = 64;
    c.d_model = 32;
    c.n_layer = 2;
    c.n_head = 4;
    return {hf_gpt2_config_json(c).dump(2), hf_gpt2_config_json(GptConfig{}).dump()};
  }

  Outcome run(std::string_view input) override {
    write_scratch(dir_ + "/" + kHfConfigFile, input);
    load_hf_gpt2_config(dir_).validate();
    return {};
  }

  std::string names() const override { return kHfConfigFile; }

 private:
  std::string dir_;
};

// A merges file (tokenizer.bpe) as a shard folder, a run folder or a checkpoint carries it.
// What it accepts must still be a lossless tokenizer.
class BpeTarget final : public Target {
 public:
  explicit BpeTarget(const std::string& dir) : dir_(dir), path_(dir + "/tokenizer.bpe") {}

  std::vector<std::string> seeds() override {
    const std::string text = sample_text();
    std::vector<std::string> out;
    for (int32_t vocab : {256, 300, 400}) {
      const std::string path = dir_ + "/seed-" + std::to_string(vocab) + ".bpe";
      BpeTokenizer::train(text, vocab).save(path);
      out.push_back(read_scratch(path));
    }
    return out;
  }

  Outcome run(std::string_view input) override {
    write_scratch(path_, input);
    const BpeTokenizer tok = BpeTokenizer::load(path_);
    const std::string text = sample_text();
    if (tok.decode(tok.encode(text)) != text) {
      throw std::logic_error("accepted merges file does not round-trip text");
    }
    // Every id decodes (the first few thousand: tokens may be up to a MiB each).
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < tok.vocab_size() && i < 4096; ++i) ids.push_back(i);
    (void)tok.decode(ids);
    return {};
  }

  std::string names() const override { return path_; }

 private:
  static std::string sample_text() {
    std::string s;
    for (int i = 0; i < 40; ++i) {
      s += "the quick brown fox jumps over the lazy dog; brigade trains " + std::to_string(i) +
           " models\n";
    }
    return s + "caf\xc3\xa9 \xff\xfe====\t\t end";
  }

  std::string dir_;
  std::string path_;
};

}  // namespace

std::unique_ptr<Target> make_config_target(const std::string& dir) {
  return std::make_unique<ConfigTarget>(dir);
}
std::unique_ptr<Target> make_config_set_target(const std::string&) {
  return std::make_unique<ConfigSetTarget>();
}
std::unique_ptr<Target> make_hf_config_target(const std::string& dir) {
  return std::make_unique<HfConfigTarget>(dir);
}
std::unique_ptr<Target> make_bpe_target(const std::string& dir) {
  return std::make_unique<BpeTarget>(dir);
}

}  // namespace brigade::fuzz
