#include "brigade/train/fed_data.h"

#include <fmt/format.h>

#include "brigade/base/error.h"
#include "brigade/data/byte_tokenizer.h"
#include "brigade/data/client_folders.h"
#include "brigade/data/idx_reader.h"
#include "brigade/data/text_corpus.h"
#include "brigade/train/fed_roles.h"

namespace brigade {

namespace {

// The coordinator evaluates an image test set in batches of this many examples.
constexpr int64_t kImageEvalBatch = 1000;

// Every document of `spec` (no validation split: the file is one side of it already) as byte
// tokens cut into windows of the run's context.
std::unique_ptr<Dataset> text_windows(const Config& config, const std::string& spec,
                                      const std::string& what) {
  const TextSplits text = load_text_files(spec, 0.0);
  const int64_t T = config.context();
  if (static_cast<int64_t>(text.train.size()) < T + 1) {
    throw ConfigError(fmt::format(
        "{} ({}) holds {} bytes of text, fewer than one window of data.seq_len + 1 = {} tokens",
        what, spec, text.train.size(), T + 1));
  }
  return std::make_unique<TokenDataset>(ByteTokenizer().encode(text.train), T);
}

}  // namespace

bool fed_trains_text(const Config& config) {
  return config.data.source == DataSource::kText;
}

std::unique_ptr<Dataset> load_client_data(const Config& config, int client) {
  const std::string dir = client_data_folder(config.fed, client);
  if (fed_trains_text(config)) {
    return text_windows(config, dir + "/" + kClientTextFile,
                        fmt::format("client {}'s data (fed.client_data)", client));
  }
  return std::make_unique<ImageDataset>(load_fashion_mnist(dir, "train"));
}

std::string fed_test_source(const Config& config) {
  if (!config.fed.test_data.empty()) return config.fed.test_data;
  return config.data.path.empty() ? kDefaultFashionMnistDir : config.data.path;
}

std::unique_ptr<Dataset> load_fed_test_set(const Config& config) {
  if (fed_trains_text(config)) {
    return text_windows(config, config.fed.test_data, "the test set (fed.test_data)");
  }
  return std::make_unique<ImageDataset>(load_fashion_mnist(fed_test_source(config), "t10k"));
}

int64_t fed_eval_batch(const Config& config) {
  return fed_trains_text(config) ? config.train.micro_batch : kImageEvalBatch;
}

int64_t fed_eval_batches(const Config& config) {
  // A text test set may be any size: train.eval_batches bounds it as in centralised training.
  return fed_trains_text(config) ? config.train.eval_batches : 0;
}

}  // namespace brigade
