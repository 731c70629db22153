// Targets for the binary data formats: safetensors, token shards (alone and as a shard folder
// with its tokenizer, as `train` reads it), IDX images and labels (raw and gzip).
#include <zlib.h>

#include <cstring>
#include <map>
#include <stdexcept>

#include "brigade/ckpt/safetensors.h"
#include "brigade/data/bpe.h"
#include "brigade/data/idx_reader.h"
#include "brigade/data/token_shard.h"
#include "brigade/runtime/config.h"
#include "brigade/train/training_data.h"
#include "fuzz/fuzz_target.h"

namespace brigade::fuzz {

namespace {

// A safetensors file as `brigade import` and the checkpoint reader open it, every tensor read.
class SafetensorsTarget final : public Target {
 public:
  explicit SafetensorsTarget(const std::string& dir)
      : dir_(dir), path_(dir + "/fuzz.safetensors") {}

  std::vector<std::string> seeds() override {
    const std::vector<float> w = {1, 2, 3, 4, 5, 6};
    const std::vector<uint16_t> h = {0x3f80, 0x4000, 0xc000, 0x7f80};  // bf16 1, 2, -2, inf
    const std::vector<int64_t> ids = {7, -1};
    const uint8_t flag = 1;
    const std::vector<StTensorView> views = {
        {.name = "h.0.w", .dtype = StDtype::kF32, .shape = {2, 3}, .data = w.data(), .nbytes = 24},
        {.name = "h.0.b", .dtype = StDtype::kBF16, .shape = {4}, .data = h.data(), .nbytes = 8},
        {.name = "ids", .dtype = StDtype::kI64, .shape = {2}, .data = ids.data(), .nbytes = 16},
        {.name = "flag", .dtype = StDtype::kU8, .shape = {}, .data = &flag, .nbytes = 1},
    };
    const std::string seed = dir_ + "/seed.safetensors";
    write_safetensors(seed, views, {{"format", "pt"}});
    const SafetensorsFile f = SafetensorsFile::open(seed);
    for (const std::string& name : f.names()) reference_[name] = read_all(f, name);
    return {read_scratch(seed)};
  }

  Outcome run(std::string_view input) override {
    write_scratch(path_, input);
    const SafetensorsFile f = SafetensorsFile::open(path_);
    Outcome o;
    for (const std::string& name : f.names()) {
      const std::string bytes = read_all(f, name);
      const auto it = reference_.find(name);
      o.changed |= it == reference_.end() || it->second != bytes;
      const StDtype d = f.info(name).dtype;
      if (d == StDtype::kF32 || d == StDtype::kBF16 || d == StDtype::kF16) {
        std::vector<float> values(static_cast<size_t>(f.info(name).numel()));
        f.read_f32(name, values.data(), static_cast<int64_t>(values.size()));
      }
    }
    o.changed |= f.names().size() != reference_.size();
    return o;
  }

  std::string names() const override { return path_; }

 private:
  static std::string read_all(const SafetensorsFile& f, const std::string& name) {
    const StTensorInfo& info = f.info(name);
    std::string bytes(static_cast<size_t>(info.end - info.begin), '\0');
    f.read_raw(name, bytes.data(), static_cast<int64_t>(bytes.size()));
    return bytes;
  }

  std::string dir_;
  std::string path_;
  std::map<std::string, std::string> reference_;
};

std::vector<int32_t> ramp(int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 7919) % vocab;
  return t;
}

// One token shard, header then every token.
class TokenShardTarget final : public Target {
 public:
  explicit TokenShardTarget(const std::string& dir) : dir_(dir), path_(dir + "/fuzz.bin") {}

  std::vector<std::string> seeds() override {
    std::vector<std::string> out;
    for (const int vocab : {300, 65536, 70000}) {
      const std::string seed = dir_ + "/seed.bin";
      write_token_shard(seed, ramp(200, vocab), static_cast<uint32_t>(vocab));
      out.push_back(read_scratch(seed));
      references_.push_back(ramp(200, vocab));
    }
    return out;
  }

  Outcome run(std::string_view input) override {
    write_scratch(path_, input);
    const TokenShardInfo info = read_token_shard_info(path_);
    TokenShardInfo again;
    const std::vector<int32_t> tokens = read_token_shard(path_, &again);
    if (again.num_tokens != info.num_tokens || tokens.size() != info.num_tokens) {
      throw std::logic_error("read_token_shard and read_token_shard_info disagree");
    }
    Outcome o;
    o.changed = true;
    for (const auto& r : references_) o.changed &= tokens != r;
    return o;
  }

  std::string names() const override { return path_; }

 private:
  std::string dir_;
  std::string path_;
  std::vector<std::vector<int32_t>> references_;
};

// A folder written by `brigade tokenize` (train.bin, val.bin, tokenizer.bpe) read the way
// `brigade train` reads it with data.source = "shards"; the input is train.bin.
class ShardFolderTarget final : public Target {
 public:
  explicit ShardFolderTarget(const std::string& dir) : dir_(dir) {}

  std::vector<std::string> seeds() override {
    std::string text;
    for (int i = 0; i < 30; ++i)
      text += "to be or not to be, that is the question " + std::to_string(i) + "\n";
    const BpeTokenizer tok = BpeTokenizer::train(text, 300);
    tok.save(dir_ + "/" + kTokenizerFile);
    const std::vector<int32_t> ids = tok.encode(text);
    const auto vocab = static_cast<uint32_t>(tok.vocab_size());
    write_token_shard(dir_ + "/" + kValShardFile, ids, vocab);
    write_token_shard(dir_ + "/seed.bin", ids, vocab);
    std::vector<int32_t> wide = ids;
    write_token_shard(dir_ + "/seed-wide.bin", wide,
                      512);  // a header vocabulary above the tokenizer's
    return {read_scratch(dir_ + "/seed.bin"), read_scratch(dir_ + "/seed-wide.bin")};
  }

  Outcome run(std::string_view input) override {
    write_scratch(dir_ + "/" + kTrainShardFile, input);
    Config config = parse_config("", "fuzz.toml",
                                 {"data.source=\"shards\"", "data.path=\"" + dir_ + "\"",
                                  "model.vocab=512", "model.seq_len=16"});
    config.validate();
    const TrainingData data = load_training_data(config, RunFolder{dir_ + "/run"});
    if (data.train->size() <= 0 || data.val->size() <= 0) {
      throw std::logic_error("accepted shard folder with an empty dataset");
    }
    return {};
  }

  std::string names() const override { return dir_; }

 private:
  std::string dir_;
};

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// The same bytes gzip-compressed, as Fashion-MNIST ships them.
std::string gzip(const std::string& dir, const std::string& bytes) {
  const std::string path = dir + "/seed.gz";
  gzFile f = gzopen(path.c_str(), "wb");
  if (f == nullptr ||
      gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) !=
          static_cast<int>(bytes.size()) ||
      gzclose(f) != Z_OK) {
    throw std::runtime_error("cannot write " + path);
  }
  return read_scratch(path);
}

// IDX images or labels (idx_reader.h), raw or gzip.
class IdxTarget final : public Target {
 public:
  IdxTarget(const std::string& dir, bool images)
      : dir_(dir),
        path_(dir + (images ? "/fuzz-images-idx3-ubyte.gz" : "/fuzz-labels.gz")),
        images_(images) {}

  std::vector<std::string> seeds() override {
    std::string raw;
    if (images_) {
      raw = be32(kIdxImagesMagic) + be32(3) + be32(4) + be32(4);
      for (int i = 0; i < 3 * 16; ++i) raw += static_cast<char>(i * 5);
    } else {
      raw = be32(kIdxLabelsMagic) + be32(5) + std::string("\0\1\2\3\4", 5);
    }
    return {raw, gzip(dir_, raw)};
  }

  Outcome run(std::string_view input) override {
    write_scratch(path_, input);
    if (images_) {
      const IdxImages im = read_idx_images(path_);
      if (static_cast<int64_t>(im.pixels.size()) != im.count * im.rows * im.cols) {
        throw std::logic_error("IDX images: pixel count does not match the header");
      }
    } else {
      (void)read_idx_labels(path_);
    }
    return {};
  }

  std::string names() const override { return path_; }

 private:
  std::string dir_;
  std::string path_;
  bool images_;
};

}  // namespace

std::unique_ptr<Target> make_safetensors_target(const std::string& dir) {
  return std::make_unique<SafetensorsTarget>(dir);
}
std::unique_ptr<Target> make_token_shard_target(const std::string& dir) {
  return std::make_unique<TokenShardTarget>(dir);
}
std::unique_ptr<Target> make_shard_folder_target(const std::string& dir) {
  return std::make_unique<ShardFolderTarget>(dir);
}
std::unique_ptr<Target> make_idx_images_target(const std::string& dir) {
  return std::make_unique<IdxTarget>(dir, true);
}
std::unique_ptr<Target> make_idx_labels_target(const std::string& dir) {
  return std::make_unique<IdxTarget>(dir, false);
}

}  // namespace brigade::fuzz
