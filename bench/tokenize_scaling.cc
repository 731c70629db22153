// Distributed preprocessing (issue 18): tokens/s of `brigade tokenize` on 1 rank and on
// `brigade launch --nproc 2`, side by side, and what training the merges on rank 0 costs.
//
// Writes a synthetic corpus of about --mb megabytes under --dir (16 files of paragraphs of words
// drawn Zipf-like from 30,000 made-up words, deterministic), then:
//   1. trains the merges once (`tokenize --vocab V`, 1 rank), reporting the merge training time
//      apart (what ranks > 0 wait for);
//   2. times, interleaved, best of --iters, `tokenize --merges` on 1 and on 2 ranks, wall clock of
//      the whole command (launcher, every rank's walk of the corpus, the index) and the
//      command's own figure (from the merges being ready to the index written);
//   3. runs byte tokens (no encoding to speak of) on 1 and 2 ranks: the corpus walk and writes
//      that every rank pays whatever N, the part that does not scale;
//   4. checks the 1- and 2-rank folders are byte-identical.
//
//   bench_tokenize_scaling [--brigade build/release/brigade] [--dir DIR] [--mb 64] [--vocab 4096]
//                          [--iters 3] [--keep]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <string>

#include "brigade/data/shard_index.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string make_word(std::mt19937& gen) {
  static const char kLetters[] = "etaoinshrdlcumwfgypbvkjxqz";
  const int len = 2 + static_cast<int>(gen() % 9);
  std::string w;
  for (int i = 0; i < len; ++i) w += kLetters[std::min<uint32_t>(gen() % 26, gen() % 26)];
  return w;
}

// 16 files of paragraphs of 20-300 words, Zipf(1) over the words.
int64_t write_corpus(const std::string& dir, int64_t bytes) {
  std::mt19937 gen(18);
  std::vector<std::string> words(30000);
  for (auto& w : words) w = make_word(gen);
  std::vector<double> cdf(words.size());
  double sum = 0;
  for (size_t i = 0; i < words.size(); ++i) cdf[i] = sum += 1.0 / static_cast<double>(i + 1);
  std::uniform_real_distribution<double> u(0, sum);
  std::filesystem::create_directories(dir);
  int64_t written = 0;
  for (int f = 0; f < 16; ++f) {
    std::string text;
    while (static_cast<int64_t>(text.size()) < bytes / 16) {
      const int n = 20 + static_cast<int>(gen() % 280);
      for (int k = 0; k < n; ++k) {
        const size_t i = std::lower_bound(cdf.begin(), cdf.end(), u(gen)) - cdf.begin();
        text += words[std::min(i, words.size() - 1)];
        text += k % 17 == 16 ? ".\n" : k + 1 < n ? " " : ".";
      }
      text += "\n\n";
    }
    std::ofstream(fmt::format("{}/part{:02d}.txt", dir, f)) << text;
    written += static_cast<int64_t>(text.size());
  }
  return written;
}

struct Run {
  double wall_s = 0;
  double reported_s = 0;  // the command's "tokenized in X s"
  double merges_s = 0;    // its "merges X s"
  std::string output;
};

Run run(const std::string& command) {
  Run r;
  const auto t0 = Clock::now();
  std::FILE* p = popen((command + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while (p && (n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = p ? pclose(p) : -1;
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (status != 0) {
    std::fprintf(stderr, "failed (%d): %s\n%s\n", status, command.c_str(), r.output.c_str());
    std::exit(1);
  }
  std::smatch m;
  if (std::regex_search(r.output, m, std::regex("merges ([0-9.]+) s, tokenized in ([0-9.]+) s"))) {
    r.merges_s = std::stod(m[1]);
    r.reported_s = std::stod(m[2]);
  }
  return r;
}

bool same_folders(const std::string& a, const std::string& b) {
  auto files = [](const std::string& d) {
    std::map<std::string, std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(d)) {
      std::ifstream in(e.path(), std::ios::binary);
      out[e.path().filename().string()] = std::string(std::istreambuf_iterator<char>(in), {});
    }
    return out;
  };
  return files(a) == files(b);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("tokenize on 1 and 2 ranks");
  std::string brigade = "build/release/brigade";
  std::string dir = "/tmp/brigade-bench-tokenize";
  int64_t mb = 64;
  int vocab = 4096;
  int iters = 3;
  bool keep = false;
  app.add_option("--brigade", brigade);
  app.add_option("--dir", dir);
  app.add_option("--mb", mb);
  app.add_option("--vocab", vocab);
  app.add_option("--iters", iters);
  app.add_flag("--keep", keep, "leave the corpus and the outputs in --dir");
  CLI11_PARSE(app, argc, argv);

  std::filesystem::remove_all(dir);
  const int64_t bytes = write_corpus(dir + "/corpus", mb << 20);
  const std::string base = fmt::format("{} tokenize --source text --input {}/corpus", brigade, dir);
  const Run trained = run(fmt::format("{} --out {}/trained --vocab {}", base, dir, vocab));
  const Run trained2 =
      run(fmt::format("{} launch --nproc 2 -- tokenize --source text --input "
                      "{}/corpus --out {}/trained2 --vocab {}",
                      brigade, dir, dir, vocab));
  const std::string merges = dir + "/trained/tokenizer.bpe";
  const brigade::IndexedSplits index = brigade::read_indexed_shards(dir + "/trained");
  const int64_t tokens = index.index.train.tokens() + index.index.val.tokens();

  Run best[2];
  for (int i = 0; i < iters; ++i) {
    for (int n : {1, 2}) {
      const std::string out = fmt::format("{}/given{}", dir, n);
      const Run r = run(n == 1 ? fmt::format("{} --out {} --merges {}", base, out, merges)
                               : fmt::format("{} launch --nproc 2 -- tokenize --source text "
                                             "--input {}/corpus --out {} --merges {}",
                                             brigade, dir, out, merges));
      if (i == 0 || r.wall_s < best[n - 1].wall_s) best[n - 1] = r;
    }
  }
  // Byte tokens: encoding is a copy, so this is the walk of the corpus (read, clean, split) and
  // the writes that every rank pays whatever N.
  Run bytes_run[2];
  for (int n : {1, 2}) {
    bytes_run[n - 1] =
        run(fmt::format("{} launch --nproc {} -- tokenize --source text --input "
                        "{}/corpus --out {}/bytes{} --vocab 256",
                        brigade, n, dir, dir, n));
  }
  const bool same = same_folders(dir + "/given1", dir + "/given2") &&
                    same_folders(dir + "/given1", dir + "/trained") &&
                    same_folders(dir + "/trained", dir + "/trained2");

  std::printf(
      "corpus: %.1f MB in 16 files; vocab %d; %lld tokens (%.2f bytes/token), %zu + %zu "
      "shards\n",
      static_cast<double>(bytes) / 1e6, vocab, static_cast<long long>(tokens),
      static_cast<double>(bytes) / static_cast<double>(tokens), index.index.train.shards.size(),
      index.index.val.shards.size());
  std::printf("merge training on rank 0: %.1f s (1 rank), %.1f s (2 ranks; rank 1 waits)\n",
              trained.merges_s, trained2.merges_s);
  std::printf("whole command with training: %.2f s (1 rank), %.2f s (2 ranks)\n", trained.wall_s,
              trained2.wall_s);
  std::printf("%-28s %10s %14s %10s %14s\n", "given merges, best of iters", "wall s", "tokens/s",
              "own s", "tokens/s");
  for (int n : {1, 2}) {
    const Run& r = best[n - 1];
    std::printf("%-28s %10.2f %14.0f %10.2f %14.0f\n", n == 1 ? "1 rank" : "2 ranks", r.wall_s,
                static_cast<double>(tokens) / r.wall_s, r.reported_s,
                static_cast<double>(tokens) / r.reported_s);
  }
  std::printf("byte tokens (encoding a copy): own %.2f s (1 rank), %.2f s (2 ranks)\n",
              bytes_run[0].reported_s, bytes_run[1].reported_s);
  std::printf("ratio 2 ranks / 1 rank: %.2fx wall, %.2fx own\n", best[0].wall_s / best[1].wall_s,
              best[0].reported_s / best[1].reported_s);
  std::printf("folders byte-identical (1 rank, 2 ranks, trained, given): %s\n",
              same ? "yes" : "NO");
  if (!keep) std::filesystem::remove_all(dir);
  return same ? 0 : 1;
}
