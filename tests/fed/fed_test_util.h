#pragma once
// Shared by the federated-learning tests: small client folders in the IDX format that
// `brigade partition` writes, the config of a tiny federation, and the reference arithmetic
// the coordinator must match (a whole-model gradient of a batch, computed on one process).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "brigade/base/file_io.h"
#include "brigade/data/idx_reader.h"
#include "brigade/data/idx_writer.h"
#include "brigade/fed/state_file.h"
#include "brigade/model/mlp_classifier.h"
#include "common/run_command.h"

namespace brigade::testing {

inline constexpr int kTinyExamples = 32;  // per client

// Writes a Fashion-MNIST-shaped split `split` ("train" or "t10k") of `count` examples with
// pixels and labels drawn from `seed`.
inline void write_tiny_split(const std::string& dir, const std::string& split, int count,
                             uint64_t seed) {
  make_dirs(dir);
  IdxImages images;
  images.count = count;
  images.rows = images.cols = 28;
  images.pixels.resize(static_cast<size_t>(count) * 784);
  std::vector<int32_t> labels(static_cast<size_t>(count));
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
  auto next = [&s] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  for (auto& p : images.pixels) p = static_cast<uint8_t>(next() % 256);
  for (auto& l : labels) l = static_cast<int32_t>(next() % 10);
  write_idx_images(dir + "/" + split + "-images-idx3-ubyte.gz", images);
  write_idx_labels(dir + "/" + split + "-labels-idx1-ubyte.gz", labels);
}

// data/client_0 .. client_{clients-1} (train splits) and data/test (a t10k split).
inline void write_tiny_federation(const std::string& root, int clients) {
  for (int k = 0; k < clients; ++k) {
    write_tiny_split(root + "/data/client_" + std::to_string(k), "train", kTinyExamples,
                     100 + static_cast<uint64_t>(k));
  }
  write_tiny_split(root + "/data/test", "t10k", 50, 99);
}

// The [fed] defaults of the tests (3 rounds of one local step) that `fed_extra` does not set.
inline std::string fed_defaults(const std::string& fed_extra) {
  std::string out;
  for (const char* line : {"rounds = 3", "local_steps = 1", "round_deadline_s = 60"}) {
    const std::string key = std::string(line).substr(0, std::string(line).find(' '));
    const bool set =
        fed_extra.rfind(key + " ", 0) == 0 || fed_extra.find("\n" + key + " ") != std::string::npos;
    if (!set) out += std::string(line) + "\n";
  }
  return out;
}

// The config of a tiny federation: an MLP with one hidden layer of 16, plain SGD.
inline std::string tiny_fed_config(const std::string& root, const std::string& fed_extra = "") {
  return "[run]\nname = \"fed\"\nseed = 7\n"
         "[model]\nkind = \"mlp\"\nhidden = [16]\n"
         "[data]\nsource = \"fashion_mnist\"\npath = \"" +
         root +
         "/data/test\"\n"
         "[train]\noptimizer = \"sgd\"\nlr = 0.1\nmomentum = 0.0\nweight_decay = 0.0\n"
         "micro_batch = " +
         std::to_string(kTinyExamples) +
         "\n"
         "[sync]\nmethod = \"fed\"\n"
         "[comm]\ntimeout_s = 30\n"
         "[fed]\n" +
         fed_defaults(fed_extra) + "client_data = \"" + root +
         "/data/client_{client}\"\n"
         "test_data = \"" +
         root + "/data/test\"\n" + fed_extra;
}

// The model of tiny_fed_config with its initial parameters (the coordinator's, run.seed 7).
inline std::unique_ptr<MlpClassifier> tiny_model(int64_t max_batch) {
  auto model = std::make_unique<MlpClassifier>(
      MlpConfig{.input = 784, .hidden = {16}, .classes = 10}, max_batch);
  model->initialize(7);
  return model;
}

// The mean-loss gradient of `model` at its parameters over the examples of `sets`, as one batch.
inline std::vector<float> batch_gradient(MlpClassifier& model, const std::vector<ImageSet>& sets) {
  Batch batch;
  for (const ImageSet& s : sets) {
    batch.features.insert(batch.features.end(), s.features.begin(), s.features.end());
    batch.targets.insert(batch.targets.end(), s.labels.begin(), s.labels.end());
    batch.size += s.count;
  }
  model.zero_grads();
  model.forward(batch);
  model.backward(batch, 1.0f);
  return std::vector<float>(model.grads(), model.grads() + model.num_params());
}

// ||a - b|| / ||b||.
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// A federation of kClients tiny clients in a temporary folder, launched through `brigade launch`.
class TinyFederation : public ::testing::Test {
 public:
  void SetUp() override {
    dir_ = make_temp_dir("fed");
    write_tiny_federation(dir_, kClients);
  }

  const std::string& dir() const { return dir_; }

  std::string command(const std::string& name, const std::string& fed_extra,
                      const std::string& launch_extra = "") {
    const std::string config = dir_ + "/" + name + ".toml";
    std::ofstream(config) << tiny_fed_config(dir_, fed_extra);
    return std::string(BRIGADE_BINARY) + " launch --nproc " + std::to_string(kClients + 1) + " " +
           launch_extra + " -- train " + config + " --set run.out_dir=" + dir_ + "/" + name;
  }

  void run(const std::string& name, const std::string& fed_extra, const std::string& set = "") {
    const std::string cmd = command(name, fed_extra) + set;
    const auto r = run_command(cmd, 240);
    ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  }

  StateFile coordinator_state(const std::string& name) const {
    return read_state_file(dir_ + "/" + name + "/fed/fed/coordinator.state");
  }

  // The global model run `name` ended with.
  std::vector<float> global_params(const std::string& name) const {
    return coordinator_state(name).tensor("params", tiny_model(1)->num_params(), name);
  }

  std::vector<ImageSet> client_sets() const {
    std::vector<ImageSet> sets;
    for (int k = 0; k < kClients; ++k) {
      sets.push_back(load_fashion_mnist(dir_ + "/data/client_" + std::to_string(k), "train"));
    }
    return sets;
  }

  static constexpr int kClients = 3;
  static constexpr float kLr = 0.1f;
  std::string dir_;
};

}  // namespace brigade::testing
