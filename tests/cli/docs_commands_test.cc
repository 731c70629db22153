// The commands the docs show are commands brigade takes (issue 37: docs that had drifted from the
// code). Every `brigade ...` line of a shell block in README.md and docs/*.md is read as a user
// would type it: each option it passes to a subcommand must be one that subcommand's --help
// lists (under `brigade launch`, the launcher's options before `--` and the worker
// subcommand's after it), and each `--set section.key=...` must name a key of the config (as
// check-config prints the resolved config, every key with its value). The tour's commands are
// also run end to end (readme_tour_slow_test.cc); these are only read, so the check is quick.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "brigade/base/file_io.h"
#include "common/run_command.h"

namespace brigade {
namespace {

struct DocCommand {
  std::string file;
  std::string line;
};

// The `brigade` lines of the ```sh / ```bash / ```console blocks of a Markdown file, a line
// continued with a trailing backslash joined to the next.
std::vector<DocCommand> doc_commands(const std::string& path) {
  std::vector<DocCommand> out;
  std::istringstream in(read_file(path));
  bool shell = false;
  std::string pending;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      shell = !shell && (line == "```sh" || line == "```bash" || line == "```console");
      continue;
    }
    if (!shell) continue;
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    line = pending + line;
    pending.clear();
    if (std::regex_search(line, std::regex(R"((^|[\s/])brigade\s+[a-z])"))) {
      out.push_back({path, line});
    }
  }
  return out;
}

// Whitespace-separated words, quotes removed ("a b" stays one word).
std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::string word;
  char quote = 0;
  bool any = false;
  for (char c : line) {
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      any = true;
    } else if (c == ' ' || c == '\t') {
      if (!word.empty() || any) out.push_back(word);
      word.clear();
      any = false;
    } else if (c == '#' && word.empty()) {
      break;  // a comment
    } else {
      word += c;
    }
  }
  if (!word.empty() || any) out.push_back(word);
  return out;
}

class DocsCommands : public ::testing::Test {
 protected:
  const std::string& help(const std::string& sub) {
    auto it = help_.find(sub);
    if (it == help_.end()) {
      const auto r = testing::run_command(std::string(BRIGADE_BINARY) + " " + sub + " --help", 60);
      it = help_.emplace(sub, r.exit_code == 0 ? r.output : std::string()).first;
    }
    return it->second;
  }
  // Every section.key of the config, from the resolved default config.
  const std::set<std::string>& keys() {
    if (keys_.empty()) {
      const auto r =
          testing::run_command(std::string(BRIGADE_BINARY) + " check-config " + BRIGADE_SOURCE_DIR +
                                   "/configs/default.toml 2>/dev/null",
                               60);
      std::istringstream in(r.output);
      std::string section;
      for (std::string line; std::getline(in, line);) {
        if (line.size() > 2 && line.front() == '[' && line.back() == ']') {
          section = line.substr(1, line.size() - 2);
        } else if (const size_t eq = line.find(" = ");
                   eq != std::string::npos && !section.empty()) {
          keys_.insert(section + "." + line.substr(0, eq));
        }
      }
    }
    return keys_;
  }
  // Checks the options of `sub` in words [from, to).
  void check_options(const DocCommand& c, const std::string& sub, const std::vector<std::string>& w,
                     size_t from, size_t to) {
    const std::string& text = help(sub);
    ASSERT_FALSE(text.empty()) << c.file << ": `brigade " << sub << "` is no subcommand\n"
                               << c.line;
    for (size_t i = from; i < to; ++i) {
      if (w[i].rfind("--", 0) != 0 || w[i] == "--") continue;
      const std::string option = w[i].substr(0, w[i].find('='));
      ++options_checked_;
      EXPECT_NE(text.find(option), std::string::npos)
          << c.file << ": `brigade " << sub << "` has no option " << option << "\n"
          << c.line;
      if (option == "--set" && i + 1 < to) {
        const std::string setting =
            w[i].find('=') != std::string::npos ? w[i].substr(w[i].find('=') + 1) : w[i + 1];
        const std::string key = setting.substr(0, setting.find('='));
        // A placeholder ("--set KEY=VALUE", "[the same --set options]") names no key.
        if (!std::regex_match(key, std::regex(R"([a-z_]+\.[a-z_0-9]+)"))) continue;
        EXPECT_TRUE(keys().count(key)) << c.file << ": --set " << key << " is no config key\n"
                                       << c.line;
        ++keys_checked_;
      }
    }
  }

  std::map<std::string, std::string> help_;
  std::set<std::string> keys_;
  int options_checked_ = 0, keys_checked_ = 0;
};

TEST_F(DocsCommands, EveryOptionAndKeyTheDocsShowExists) {
  std::vector<std::string> files = {std::string(BRIGADE_SOURCE_DIR) + "/README.md"};
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(BRIGADE_SOURCE_DIR) + "/docs")) {
    if (e.path().extension() == ".md") files.push_back(e.path().string());
  }
  int checked = 0;
  for (const std::string& f : files) {
    for (const DocCommand& c : doc_commands(f)) {
      const std::vector<std::string> w = words(c.line);
      size_t at = 0;
      while (at < w.size() && !(w[at] == "brigade" || w[at].ends_with("/brigade"))) ++at;
      if (at + 1 >= w.size()) continue;
      const std::string sub = w[at + 1];
      if (sub.rfind("-", 0) == 0) continue;  // `brigade --version` and the like
      size_t end = w.size();
      for (size_t i = at + 2; i < w.size(); ++i) {
        if (w[i] == "|" || w[i] == "&&" || w[i] == ";" || w[i] == ">" || w[i] == "2>&1") {
          end = i;
          break;
        }
      }
      if (sub == "launch") {
        size_t dashes = at + 2;
        while (dashes < end && w[dashes] != "--") ++dashes;
        check_options(c, "launch", w, at + 2, dashes);
        // The worker command: a brigade subcommand (unless --exec runs a program).
        const bool exec =
            std::find(w.begin() + at + 2, w.begin() + dashes, "--exec") != w.begin() + dashes;
        if (dashes + 1 < end && !exec) check_options(c, w[dashes + 1], w, dashes + 2, end);
      } else {
        check_options(c, sub, w, at + 2, end);
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 40) << "the docs' commands were not found";
  EXPECT_GT(options_checked_, 100);
  EXPECT_GT(keys_checked_, 30);
  std::printf("%d commands, %d options, %d config keys checked\n", checked, options_checked_,
              keys_checked_);
}

}  // namespace
}  // namespace brigade
