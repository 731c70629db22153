#include "brigade/data/shard_cutter.h"

#include <fmt/format.h>

#include <filesystem>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/data/input_files.h"
#include "brigade/data/shard_index.h"
#include "brigade/data/text_corpus.h"

namespace brigade {

ShardCutter::ShardCutter(int64_t shard_text_bytes, double val_fraction, Sink sink)
    : shard_text_bytes_(shard_text_bytes), val_fraction_(val_fraction), sink_(std::move(sink)) {
  if (shard_text_bytes < 1) {
    throw ConfigError(fmt::format("--shard-bytes = {}: must be at least 1", shard_text_bytes));
  }
  check_val_fraction(val_fraction);
  for (int s = 0; s < 2; ++s) parts_[s].open.split = static_cast<Split>(s);
}

void ShardCutter::add_file(const std::string& name, const std::vector<std::string>& docs) {
  for (size_t k = 0; k < docs.size(); ++k) {
    if (docs[k].empty()) continue;
    const Split s = is_validation_doc(name, static_cast<int64_t>(k), val_fraction_) ? Split::kVal
                                                                                    : Split::kTrain;
    Part& p = parts_[static_cast<int>(s)];
    if (p.docs_total > 0) p.open.text += kDocSeparator;
    p.open.text += docs[k];
    ++p.open.docs;
    ++p.docs_total;
    if (static_cast<int64_t>(p.open.text.size()) >= shard_text_bytes_) emit(s);
  }
}

void ShardCutter::finish() {
  for (Split s : {Split::kTrain, Split::kVal}) {
    if (parts_[static_cast<int>(s)].open.docs > 0) emit(s);
  }
}

void ShardCutter::emit(Split s) {
  Part& p = parts_[static_cast<int>(s)];
  if (p.number >= kMaxShardsPerSplit) {
    throw ConfigError(fmt::format(
        "--shard-bytes = {}: the {} split needs more than {} shards; give a larger size",
        shard_text_bytes_, split_name(s), kMaxShardsPerSplit));
  }
  ShardText out = std::move(p.open);
  out.split = s;
  out.number = p.number++;
  out.unit = units_++;
  p.open = ShardText{};
  p.open.split = s;
  sink_(std::move(out));
}

int64_t cut_corpus(const std::string& source, const std::string& input, ShardCutter& cutter) {
  int64_t bytes = 0;
  if (source == "fortunes") {
    for (const std::string& path : list_fortune_files(input)) {
      const std::string content = read_file(path, kMaxDataFileBytes);
      bytes += static_cast<int64_t>(content.size());
      cutter.add_file(std::filesystem::path(path).filename().string(), parse_fortunes(content));
    }
  } else {
    for (const std::string& file : expand_input_files(input)) {
      const std::string content = read_file(file, kMaxDataFileBytes);
      bytes += static_cast<int64_t>(content.size());
      cutter.add_file(split_name_of(input, file), parse_paragraphs(content));
    }
  }
  cutter.finish();
  return bytes;
}

}  // namespace brigade
