#pragma once
// What each federated role reads (docs/federated.md): a client its own folder, the coordinator
// only its held-out test set.
//
//   images (data.source = "fashion_mnist", model mlp or cnn): a client reads the train split
//   of its folder (`brigade partition` writes IDX files); the coordinator the t10k split of
//   fed.test_data (default data.path, default the Debian Fashion-MNIST folder).
//
//   text (data.source = "text", model gpt, byte tokens): a client reads its folder's train.txt
//   (`brigade partition --data text`); the coordinator the file fed.test_data names (the
//   validation.txt that partition writes from the documents it kept out). Both are cut into
//   windows of data.seq_len + 1 byte tokens, as a centralised run's TokenDataset cuts them.
#include <memory>
#include <string>

#include "brigade/data/loader.h"
#include "brigade/runtime/config.h"

namespace brigade {

// Whether a federated config trains a language model on text clients.
bool fed_trains_text(const Config& config);

// Client k's training examples; IoError / ConfigError naming its folder.
std::unique_ptr<Dataset> load_client_data(const Config& config, int client);

// The coordinator's held-out test set, and where it lies (for the log).
std::unique_ptr<Dataset> load_fed_test_set(const Config& config);
std::string fed_test_source(const Config& config);

// The micro-batch of the coordinator's evaluation model.
int64_t fed_eval_batch(const Config& config);

// The coordinator's evaluation: how many batches of fed_eval_batch examples (0: the whole set).
int64_t fed_eval_batches(const Config& config);

}  // namespace brigade
