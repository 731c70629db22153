// A federated GPT on text clients, end to end: `brigade partition --data text` splits a corpus
// into two client folders and the coordinator's validation.txt, and `brigade launch` runs the
// federation (rank 0 coordinates, ranks 1-2 train on their own train.txt).
//
//   FedAvg with one local SGD step per round over each client's whole local set equals SGD on
//   the union of the clients' windows (FedAvg weighs each client by its window count, and every
//   window holds T targets), computed here on one process from the clients' raw files, within
//   1e-5 relative over 3 rounds; the coordinator's test loss equals the reference model's loss on
//   the windows of validation.txt, and is below the initial model's. The run leaves the global
//   model as a checkpoint of the common format, holding those weights, which eval, generate,
//   export and train.init_from take; `brigade report` plots its rounds and TensorBoard has them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/base/file_io.h"
#include "brigade/ckpt/region.h"
#include "brigade/ckpt/sharded_reader.h"
#include "brigade/fed/state_file.h"
#include "brigade/model/batch.h"
#include "brigade/train/model_factory.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "fed/fed_test_util.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

constexpr int64_t kT = 16;  // tokens per window
constexpr float kLr = 0.1f;
constexpr int kRounds = 3;

// Paragraphs of pseudo-random lowercase words, separated by blank lines.
std::string corpus() {
  uint64_t s = 12345;
  auto next = [&s] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  std::string text;
  for (int p = 0; p < 60; ++p) {
    for (int w = 0; w < 8 + static_cast<int>(next() % 8); ++w) {
      for (int c = 0; c < 2 + static_cast<int>(next() % 5); ++c) {
        text += static_cast<char>('a' + next() % 8);
      }
      text += ' ';
    }
    text += ".\n\n";
  }
  return text;
}

// The windows of a file's bytes as a centralised run cuts them: window i is
// bytes[i T, i T + T + 1), inputs its first T bytes, targets its last T.
void append_windows(const std::string& bytes, Batch& batch) {
  const auto windows = (static_cast<int64_t>(bytes.size()) - 1) / kT;
  for (int64_t i = 0; i < windows; ++i) {
    for (int64_t t = 0; t < kT; ++t) {
      batch.tokens.push_back(static_cast<unsigned char>(bytes[static_cast<size_t>(i * kT + t)]));
      batch.targets.push_back(
          static_cast<unsigned char>(bytes[static_cast<size_t>(i * kT + t + 1)]));
    }
  }
  batch.size += windows;
  batch.seq_len = kT;
}

ModelConfig tiny_gpt() {
  ModelConfig m;
  m.kind = ModelKind::kGpt;
  m.vocab = 256;
  m.seq_len = kT;
  m.d_model = 32;
  m.n_layer = 1;
  m.n_head = 2;
  return m;
}

TEST(TextFederation, FedAvgOfAGptWithOneLocalStepEqualsSgdOnTheUnionOfTheClientsWindows) {
  const std::string dir = make_temp_dir("fedtext");
  std::ofstream(dir + "/corpus.txt") << corpus();
  const std::string partition =
      std::string(BRIGADE_BINARY) + " partition --data text --path " + dir +
      "/corpus.txt --clients 2 --scheme iid --val-fraction 0.2 --out " + dir + "/data";
  const auto p = run_command(partition, 60);
  ASSERT_EQ(p.exit_code, 0) << partition << "\n" << p.output;
  const auto manifest = nlohmann::json::parse(read_file(dir + "/data/partition.json"));
  ASSERT_TRUE(manifest.contains("validation")) << manifest.dump(2);
  EXPECT_EQ(manifest["validation"]["file"], "validation.txt");

  Batch clients, validation;
  int64_t largest = 0;
  for (int k = 0; k < 2; ++k) {
    const int64_t before = clients.size;
    append_windows(read_file(dir + "/data/client_" + std::to_string(k) + "/train.txt"), clients);
    largest = std::max(largest, clients.size - before);
  }
  append_windows(read_file(dir + "/data/validation.txt"), validation);
  ASSERT_GT(largest, 10);
  ASSERT_GT(validation.size, 2);

  // One local step takes a client's whole set: micro_batch holds the larger client's windows.
  const std::string config = dir + "/fedgpt.toml";
  std::ofstream(config) << "[run]\nname = \"fedgpt\"\nseed = 7\n"
                        << "[model]\nkind = \"gpt\"\nvocab = 256\nseq_len = " << kT
                        << "\nd_model = 32\nn_layer = 1\nn_head = 2\n"
                        << "[data]\nsource = \"text\"\n"
                        << "[train]\noptimizer = \"sgd\"\nlr = " << kLr
                        << "\nmomentum = 0.0\nweight_decay = 0.0\nmicro_batch = " << largest
                        << "\neval_batches = 1000\n"
                        << "[sync]\nmethod = \"fed\"\n[comm]\ntimeout_s = 30\n"
                        << "[fed]\nrounds = " << kRounds
                        << "\nlocal_steps = 1\nround_deadline_s = 60\nclient_data = \"" << dir
                        << "/data/client_{client}\"\ntest_data = \"" << dir
                        << "/data/validation.txt\"\n";
  const std::string launch = std::string(BRIGADE_BINARY) + " launch --nproc 3 -- train " + config +
                             " --set run.out_dir=" + dir + "/run";
  const auto r = run_command(launch, 240);
  ASSERT_EQ(r.exit_code, 0) << launch << "\n" << r.output;

  auto model = make_model(tiny_gpt(), std::max(clients.size, validation.size));
  model->initialize(7);
  const int64_t n = model->num_params();
  const double initial_loss = model->forward(validation);
  for (int round = 0; round < kRounds; ++round) {
    model->zero_grads();
    model->forward(clients);
    model->backward(clients, 1.0f);
    for (int64_t i = 0; i < n; ++i) model->params()[i] -= kLr * model->grads()[i];
  }
  const std::vector<float> want(model->params(), model->params() + n);
  const StateFile state = read_state_file(dir + "/run/fedgpt/fed/coordinator.state");
  EXPECT_LT(testing::relative_error(state.tensor("params", n, "coordinator"), want), 1e-5);

  const double want_loss = model->forward(validation);
  const auto rounds = testing::metrics_records(dir + "/run/fedgpt/metrics.jsonl", "round");
  ASSERT_EQ(rounds.size(), static_cast<size_t>(kRounds));
  for (const auto& record : rounds) {
    EXPECT_EQ(record["participants"], nlohmann::json({0, 1}));
    EXPECT_GT(record["bytes_up"].get<int64_t>(), 2 * 4 * n);
    EXPECT_FALSE(record.contains("test_accuracy")) << "a language model has no accuracy";
  }
  const double got_loss = rounds.back()["test_loss"].get<double>();
  EXPECT_NEAR(got_loss, want_loss, 1e-5 * want_loss);
  // Three steps of SGD on the clients' text lower the held-out loss.
  EXPECT_LT(got_loss, initial_loss);

  // The federation leaves a model to use, as a training run does: a checkpoint of the common
  // format holding the global model of the last round (the SGD reference's weights), which
  // eval, generate, export and train.init_from take.
  const std::string run = dir + "/run/fedgpt";
  // Where it came from, as a training run's manifest.json says it: the commit, the test file.
  const auto provenance = nlohmann::json::parse(read_file(run + "/manifest.json"));
  EXPECT_TRUE(provenance.contains("git_commit")) << provenance.dump();
  EXPECT_EQ(provenance["data_files"].size(), 1u) << provenance.dump();
  EXPECT_EQ(provenance["federation"]["clients"], 2);
  auto reader = ShardedCheckpointReader::open_latest_valid(run + "/checkpoints");
  ASSERT_TRUE(reader) << "no checkpoint in " << run;
  EXPECT_EQ(reader->step(), kRounds);
  std::vector<float> saved(static_cast<size_t>(n));
  for (const ParamSpec& spec : model->layout().specs()) {
    reader->read_f32(spec.name, Region::whole(spec.shape), saved.data() + spec.offset, spec.numel);
  }
  EXPECT_LT(testing::relative_error(saved, want), 1e-5);
  const std::string bin = BRIGADE_BINARY;
  for (const std::string& use :
       {bin + " eval --ckpt " + run + " --data " + dir + "/data/validation.txt --all",
        bin + " generate --ckpt " + run + " --prompt abc --tokens 4",
        bin + " export --ckpt " + run + " --out " + dir + "/hf",
        bin + " train " + config +
            " --set sync.method=ddp --set train.steps=1 --set train.warmup=0 --set run.out_dir=" +
            dir + "/tuned --set train.init_from=" + run +
            " --set data.val_fraction=0.2 --set data.path=" + dir +
            "/data/client_0/train.txt --set fed.client_data='\"\"' --set fed.test_data='\"\"'"}) {
    const auto used = run_command(use, 120);
    EXPECT_EQ(used.exit_code, 0) << use << "\n" << used.output;
  }
  // And curves: the report plots the rounds (test loss against round and against bytes moved),
  // and TensorBoard has each round's scalars.
  const auto report = run_command(bin + " report " + run + " --out " + dir + "/report.html", 60);
  ASSERT_EQ(report.exit_code, 0) << report.output;
  const std::string html = read_file(dir + "/report.html");
  EXPECT_NE(html.find("test loss against round"), std::string::npos);
  EXPECT_NE(html.find("test loss against bytes moved"), std::string::npos);
  std::string events;
  for (const auto& f : std::filesystem::directory_iterator(run + "/tb"))
    events += read_file(f.path());
  EXPECT_NE(events.find("round/test_loss"), std::string::npos) << "no round scalars in " << run;
}

}  // namespace
}  // namespace brigade
