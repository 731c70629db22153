// Loading your own data (issue 18): how fast JSONL and instruction records become a dataset, and
// what weighting masked micro-batches costs a step.
//
// Writes a synthetic corpus of about --mb megabytes under --dir (records of 200-2000 bytes of
// word-like text; instruction records with a 40-400 byte prompt and a 20-600 byte response),
// then times, best of --iters:
//   jsonl text     load_jsonl_text: read, parse every line (bounded), split by record
//   text folder    load_text_files over the same text as 16 plain files of paragraphs
//   instruction    load_jsonl_instructions + the two InstructionDatasets (byte tokens, T = 256)
//   weights        masked_micro_batch_weights for one step of a global batch of 512 examples
//                  (the extra work a rank does per step on instruction data), for dp = 1 and 8
//
//   bench_jsonl_load [--dir DIR] [--mb 50] [--iters 3]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "brigade/data/byte_tokenizer.h"
#include "brigade/data/instruction_dataset.h"
#include "brigade/data/jsonl_corpus.h"
#include "brigade/data/micro_batch_weights.h"
#include "brigade/data/text_corpus.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string words(std::mt19937& gen, size_t bytes) {
  static const char* kWords[] = {"the",  "data", "of",       "training", "a",    "model",
                                 "is",   "and",  "gradient", "to",       "rank", "in",
                                 "café", "über", "日本語",   "step",     "loss", "with"};
  std::string s;
  while (s.size() < bytes) {
    s += kWords[gen() % (sizeof(kWords) / sizeof(kWords[0]))];
    s += gen() % 12 == 0 ? ". " : " ";
  }
  return s;
}

template <typename F>
double best_seconds(int iters, F f) {
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"JSONL and instruction data loading"};
  std::string dir = "/tmp/brigade-bench-jsonl";
  double mb = 50;
  int iters = 3;
  app.add_option("--dir", dir);
  app.add_option("--mb", mb);
  app.add_option("--iters", iters);
  CLI11_PARSE(app, argc, argv);
  namespace fs = std::filesystem;
  fs::remove_all(dir);
  fs::create_directories(dir + "/text");
  const size_t target = static_cast<size_t>(mb * 1e6);
  std::mt19937 gen(1);
  size_t text_bytes = 0, inst_bytes = 0, records = 0, inst_records = 0;
  {
    std::ofstream jsonl(dir + "/docs.jsonl");
    std::ofstream inst(dir + "/inst.jsonl");
    std::vector<std::ofstream> parts;
    for (int p = 0; p < 16; ++p) parts.emplace_back(fmt::format("{}/text/part{:02}.txt", dir, p));
    while (text_bytes < target) {
      const std::string doc = words(gen, 200 + gen() % 1800);
      const std::string line = nlohmann::json{{"text", doc}, {"id", records}}.dump() + "\n";
      jsonl << line;
      parts[records % 16] << doc << "\n\n";
      text_bytes += line.size();
      ++records;
    }
    while (inst_bytes < target) {
      const std::string line = nlohmann::json{{"prompt", words(gen, 40 + gen() % 360) + "\nA: "},
                                              {"response", words(gen, 20 + gen() % 580)}}
                                   .dump() +
                               "\n";
      inst << line;
      inst_bytes += line.size();
      ++inst_records;
    }
  }
  fmt::print(
      "corpus: {:.1f} MB of JSONL documents ({} records), {:.1f} MB of instruction records "
      "({}); {} iterations, best\n",
      text_bytes / 1e6, records, inst_bytes / 1e6, inst_records, iters);

  const double t_jsonl =
      best_seconds(iters, [&] { brigade::load_jsonl_text(dir + "/docs.jsonl", "text"); });
  fmt::print("jsonl text      {:7.3f} s  {:6.1f} MB/s  {:8.0f} records/s\n", t_jsonl,
             text_bytes / 1e6 / t_jsonl, records / t_jsonl);
  const double t_text = best_seconds(iters, [&] { brigade::load_text_files(dir + "/text"); });
  fmt::print("text folder     {:7.3f} s  {:6.1f} MB/s (16 files of the same documents)\n", t_text,
             text_bytes / 1e6 / t_text);

  const brigade::ByteTokenizer bytes;
  const int64_t T = 256;
  brigade::InstructionSplits splits;
  const double t_parse = best_seconds(iters, [&] {
    splits = brigade::load_jsonl_instructions(dir + "/inst.jsonl", "prompt", "response");
  });
  int64_t targets = 0;
  const double t_build = best_seconds(iters, [&] {
    brigade::InstructionDataset train(splits.train, bytes, T, "train");
    targets = train.total_targets();
  });
  fmt::print(
      "instruction     {:7.3f} s parse ({:6.1f} MB/s) + {:.3f} s InstructionDataset of {} "
      "examples, T = {}, {} response targets\n",
      t_parse, inst_bytes / 1e6 / t_parse, t_build, splits.train.size(), T, targets);

  brigade::InstructionDataset train(splits.train, bytes, T, "train");
  for (int64_t dp : {1, 8}) {
    const int64_t G = 512, accum = 4, micro = G / (dp * accum);
    brigade::Sampler sampler(brigade::SamplerOptions{.num_examples = train.size(),
                                                     .seed = 1,
                                                     .micro_batch = micro,
                                                     .grad_accum = accum,
                                                     .dp_size = dp,
                                                     .dp_rank = 0});
    std::vector<float> w(static_cast<size_t>(accum));
    const int steps = 200;
    const double t = best_seconds(iters, [&] {
      for (int s = 0; s < steps; ++s)
        brigade::masked_micro_batch_weights(train, sampler, s, true, w.data());
    });
    fmt::print("weights         {:7.1f} us per step (global batch {}, dp = {}, grad_accum = {})\n",
               t / steps * 1e6, G, dp, accum);
  }
  fs::remove_all(dir);
  return 0;
}
