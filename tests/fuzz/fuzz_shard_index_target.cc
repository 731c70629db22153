// index.json of a tokenized corpus folder, as data.source = "shards" reads it
// (read_indexed_shards): the index parsed and validated, then every shard and the tokenizer it
// lists checked against their recorded sizes and CRC-32 and read. The shards themselves are
// real, so accepted inputs reach the reads.
#include "brigade/base/file_io.h"
#include "brigade/data/bpe.h"
#include "brigade/data/shard_cutter.h"
#include "brigade/data/shard_index.h"
#include "brigade/data/shard_writer.h"
#include "fuzz/fuzz_target.h"

namespace brigade::fuzz {

namespace {

class ShardIndexTarget final : public Target {
 public:
  explicit ShardIndexTarget(const std::string& dir) : dir_(dir) {}

  std::vector<std::string> seeds() override {
    std::string text;
    for (int i = 0; i < 40; ++i) {
      text += "  paragraph " + std::to_string(i) + " of to be or not to be\n\n";
    }
    write_scratch(dir_ + "/corpus.txt", text);
    const BpeTokenizer bpe = BpeTokenizer::train(text, 300);
    bpe.save(dir_ + "/tokenizer.bpe");
    const FileDigest d = digest_file(dir_ + "/tokenizer.bpe");
    TokenShardIndex index{.tokenizer = "bpe",
                          .tokenizer_bytes = d.bytes,
                          .tokenizer_crc32 = d.crc32,
                          .vocab = static_cast<uint32_t>(bpe.vocab_size()),
                          .val_fraction = 0.2,
                          .shard_text_bytes = 300};
    ShardCutter cutter(300, 0.2, [&](ShardText&& s) {
      (s.split == Split::kTrain ? index.train : index.val)
          .shards.push_back(write_shard(dir_, s, bpe, 0));
    });
    cut_corpus("text", dir_ + "/corpus.txt", cutter);
    return {shard_index_json(index)};
  }

  Outcome run(std::string_view input) override {
    write_scratch(dir_ + "/" + kShardIndexFile, input);
    read_indexed_shards(dir_);
    return {};
  }

  std::string names() const override { return dir_; }

 private:
  std::string dir_;
};

}  // namespace

std::unique_ptr<Target> make_shard_index_target(const std::string& dir) {
  return std::make_unique<ShardIndexTarget>(dir);
}

}  // namespace brigade::fuzz
