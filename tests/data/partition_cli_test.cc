// End-to-end tests of `brigade partition` as a user runs it: the real binary on the real
// Fashion-MNIST, each client folder loaded by the loader training uses, partition.json's
// checksums against the files, refusals with their exit codes, and text corpora by document.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "brigade/base/crc32c.h"
#include "brigade/base/file_io.h"
#include "brigade/data/idx_reader.h"
#include "brigade/data/text_corpus.h"
#include "common/run_command.h"
#include "data_test_util.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

class PartitionCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("partition-cli");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  testing::CommandResult partition(const std::string& args) {
    return testing::run_command(std::string(BRIGADE_BINARY) + " partition " + args, 120);
  }
  std::string dir_;
};

nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(read_file(path));
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(PartitionCli, FashionMnistDirichletClientsLoadAndMatchTheirChecksums) {
  const std::string out = dir_ + "/clients";
  const std::string args =
      "--data fashion_mnist --clients 10 --scheme dirichlet --alpha 0.5 "
      "--seed 3 --out " +
      out;
  auto run = partition(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr(out + ": 10 clients, dirichlet, seed 3"));

  const nlohmann::json j = read_json(out + "/partition.json");
  EXPECT_EQ(j["scheme"], "dirichlet");
  EXPECT_EQ(j["parameters"]["alpha"], 0.5);
  EXPECT_EQ(j["seed"], 3);
  EXPECT_EQ(j["source"], kDefaultFashionMnistDir);
  ASSERT_EQ(j["clients"].size(), 10u);
  int64_t total = 0;
  std::vector<int64_t> label_sum(10, 0);
  for (int k = 0; k < 10; ++k) {
    const nlohmann::json& c = j["clients"][k];
    const std::string folder = out + "/client_" + std::to_string(k);
    EXPECT_EQ(c["name"], "client_" + std::to_string(k));
    // Exactly the two train files: the test split belongs to the coordinator.
    EXPECT_EQ(names_in(folder), (std::vector<std::string>{"train-images-idx3-ubyte.gz",
                                                          "train-labels-idx1-ubyte.gz"}));
    const ImageSet set = load_fashion_mnist(folder, "train");
    EXPECT_EQ(set.count, c["count"].get<int64_t>());
    EXPECT_GE(set.count, 10);
    std::vector<int64_t> histogram(10, 0);
    for (int32_t label : set.labels) ++histogram[label];
    EXPECT_EQ(histogram, c["label_histogram"].get<std::vector<int64_t>>());
    for (int l = 0; l < 10; ++l) label_sum[l] += histogram[l];
    total += set.count;
    for (const auto& [name, f] : c["files"].items()) {
      const std::string bytes = read_file(folder + "/" + name);
      EXPECT_EQ(f["bytes"].get<int64_t>(), static_cast<int64_t>(bytes.size())) << name;
      EXPECT_EQ(f["crc32c"].get<uint32_t>(), crc32c(bytes)) << folder << "/" << name;
    }
  }
  EXPECT_EQ(total, 60000);
  EXPECT_EQ(label_sum, std::vector<int64_t>(10, 6000));
  EXPECT_EQ(j["label_histogram"].get<std::vector<int64_t>>(), label_sum);
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));

  // The same folder again is refused, naming it, and left as it was.
  const std::string before = read_file(out + "/partition.json");
  auto again = partition(args);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_THAT(again.output, HasSubstr(out + "\" already exists"));
  EXPECT_THAT(again.output, HasSubstr("--force"));
  EXPECT_EQ(read_file(out + "/partition.json"), before);

  // --force replaces it; the same seed writes the same bytes.
  auto forced = partition(args + " --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_EQ(read_file(out + "/partition.json"), before);
  EXPECT_FALSE(std::filesystem::exists(out + ".old"));
}

TEST_F(PartitionCli, BadOptionsExitWith2NamingThem) {
  const std::string out = " --out " + dir_ + "/x";
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--data fashion_mnist --clients 0 --scheme iid", "--clients = 0: must be in [1, 10000]"},
      {"--data fashion_mnist --clients 10 --scheme noniid", "--scheme = \"noniid\""},
      {"--data fashion_mnist --clients 10 --scheme dirichlet --alpha -1",
       "--alpha = -1: must be a finite number > 0"},
      {"--data fashion_mnist --clients 10 --scheme labels --labels-per-client 11",
       "--labels-per-client = 11: must be in [1, 10]"},
      {"--data fashion_mnist --clients 10 --scheme iid --alpha 0.1",
       "--alpha applies to --scheme dirichlet only (got --scheme = \"iid\")"},
      {"--data text --path /dev/null --clients 10 --scheme labels",
       "--scheme = \"labels\" needs labelled examples; --data text allows"},
      {"--data fashion_mnist --clients 10 --scheme iid --val-fraction 0.1",
       "--val-fraction applies to --data text only"},
      {"--data fashion_mnist --clients 2 --scheme labels --label-sets \"0,x;1\"",
       "--label-sets: \"x\" in client 0's set is not a label"},
      {"--data fashion_mnist --clients 2 --scheme labels --label-sets \"0;1\" "
       "--labels-per-client 1",
       "--labels-per-client and --label-sets both choose the labels"},
      {"--data fashion_mnist --clients 2 --scheme iid --label-sets \"0;1\"",
       "--label-sets applies to --scheme labels only"},
  };
  for (const Case& c : cases) {
    auto r = partition(c.args + out);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x"));
}

TEST_F(PartitionCli, MissingDataExitsWith3NamingTheFile) {
  auto r = partition("--data fashion_mnist --path " + dir_ + " --clients 2 --scheme iid --out " +
                     dir_ + "/x");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr(dir_ + "/train-images-idx3-ubyte.gz"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x.tmp"));
}

// Text goes by document: every train document of the file (load_text_file's split) lands in
// exactly one client's train.txt, and its validation documents in none but in validation.txt.
TEST_F(PartitionCli, TextIsPartitionedByDocument) {
  std::string text;
  for (int d = 0; d < 300; ++d) {
    text += "document " + std::to_string(d) + " says\n" + testing::synthetic_text(40, d) + "\n\n";
  }
  const std::string corpus = dir_ + "/corpus.txt";
  testing::write_bytes(corpus, text);
  const std::string out = dir_ + "/text-clients";
  auto run = partition("--data text --path " + corpus +
                       " --clients 4 --scheme quantity --beta 5 --out " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;

  const TextSplits splits = load_text_file(corpus);
  std::vector<std::string> want = parse_paragraphs(splits.train);
  std::vector<std::string> got;
  const nlohmann::json j = read_json(out + "/partition.json");
  EXPECT_EQ(j["documents"].get<int64_t>(), splits.train_docs);
  EXPECT_EQ(j["validation_documents"].get<int64_t>(), splits.val_docs);
  for (int k = 0; k < 4; ++k) {
    const std::string path = out + "/client_" + std::to_string(k) + "/train.txt";
    const std::string bytes = read_file(path);
    EXPECT_EQ(j["clients"][k]["files"]["train.txt"]["crc32c"].get<uint32_t>(), crc32c(bytes));
    const auto docs = parse_paragraphs(bytes);
    EXPECT_EQ(static_cast<int64_t>(docs.size()), j["clients"][k]["count"].get<int64_t>());
    got.insert(got.end(), docs.begin(), docs.end());
  }
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  // The validation documents are the coordinator's: validation.txt holds them, in order.
  const std::string validation = read_file(out + "/validation.txt");
  EXPECT_EQ(validation, splits.val);
  EXPECT_EQ(j["validation"]["file"], "validation.txt");
  EXPECT_EQ(j["validation"]["crc32c"].get<uint32_t>(), crc32c(validation));
}

}  // namespace
}  // namespace brigade
