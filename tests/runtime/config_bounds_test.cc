// Configs that were crashed on, read without bound, or accepted wrongly (issue 13, defects 3
// and 6): deep TOML (file and --set), a directory or /dev/zero as the config path, an oversized
// file, unbounded values in messages, and float keys given NaN or infinity, MoE keys included
// while model.n_experts = 0. Crash-prone cases run in a child process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "brigade/base/error.h"
#include "brigade/runtime/config.h"
#include "common/run_command.h"
#include "common/run_in_child.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;
using testing::run_in_child;

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string dir = testing::make_temp_dir("config-bounds");
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    parse_config("", "test.toml", overrides).validate();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigBounds, DeepTomlIsAConfigErrorNotACrash) {
  // 10,000 levels: SIGSEGV in toml11 before the pre-scan; 4,000: 5-10 s to fail.
  for (int depth : {4'000, 10'000, 30'000}) {
    const std::string text = "[model]\nhidden = " + repeat("[", depth) + "1" + repeat("]", depth);
    const auto r = run_in_child([&] { parse_config(text, "deep.toml"); }, 20);
    EXPECT_EQ(r.exit_code, kExitConfig) << depth << ": " << r.describe();
    EXPECT_THAT(r.message, HasSubstr("deep.toml: line 2: arrays and inline tables nest deeper"));
    EXPECT_LT(r.seconds, 2.0) << depth;
  }
  const auto r = run_in_child(
      [&] { parse_config("", "t", {"model.hidden=" + repeat("[", 10'000) + "1"}); }, 20);
  EXPECT_EQ(r.exit_code, kExitConfig) << r.describe();
  EXPECT_THAT(r.message, HasSubstr("--set model.hidden="));
}

TEST(ConfigBounds, ADirectoryIsNotAConfig) {
  // Was read as an empty file: the defaults trained, exit 0.
  const std::string dir = testing::make_temp_dir("config-dir");
  try {
    load_config(dir);
    ADD_FAILURE() << "a directory was accepted as a config";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir));
    EXPECT_THAT(e.what(), HasSubstr("a directory"));
  }
  const auto cli = testing::run_command(std::string(BRIGADE_BINARY) + " check-config " + dir, 60);
  EXPECT_EQ(cli.exit_code, kExitConfig) << cli.output;
  EXPECT_THAT(cli.output, HasSubstr("not a config file"));
}

TEST(ConfigBounds, DevZeroIsRefusedBeforeReading) {
  // Was read without bound: bad_alloc after about 5 s.
  const auto r = run_in_child([] { load_config("/dev/zero"); }, 20, int64_t{2} << 30);
  EXPECT_EQ(r.exit_code, kExitConfig) << r.describe();
  EXPECT_THAT(r.message, HasSubstr("/dev/zero: not a config file (not a regular file)"));
  EXPECT_LT(r.seconds, 1.0);
}

TEST(ConfigBounds, AnOversizedFileIsRefusedNamingItsSize) {
  const std::string comment_line = "#" + std::string(1022, '-') + "\n";  // 1 KiB
  const std::string path = temp_file("big.toml", repeat(comment_line, 64) + "\n");
  try {
    load_config(path);
    ADD_FAILURE() << "a 64 KiB + 1 B config was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ": 65537 bytes, more than the 65536"));
  }
  // At the limit it is only comments.
  EXPECT_NO_THROW(load_config(temp_file("ok.toml", repeat(comment_line, 64))));
}

TEST(ConfigBounds, MessagesQuoteValuesShortly) {
  // Validation quoted string values whole: 6 KB of a --set value in one message.
  for (const char* key : {"sync.method", "sync.payload", "run.name", "train.optimizer"}) {
    const std::string e = error_of({std::string(key) + "=\"" + std::string(10'000, 'x') + "!\""});
    EXPECT_THAT(e, HasSubstr(std::string(key) + " = \"xxxx"));
    EXPECT_LT(e.size(), 400u) << key;
  }
  const std::string huge_array = "[train]\nlr = [" + repeat("1, ", 5'000) + "1]\n";
  try {
    parse_config(huge_array, "t.toml");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("train.lr = [1, 1,"));
    EXPECT_LT(std::string(e.what()).size(), 400u);
  }
  const std::string long_line = "[train]\nlr = \"" + std::string(15'000, 'x');  // unterminated
  try {
    parse_config(long_line, "t.toml");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("t.toml: TOML syntax error"));
    EXPECT_LT(std::string(e.what()).size(), 4000u);
  }
}

TEST(ConfigBounds, MoeKeysAreValidatedWithoutExperts) {
  // model.n_experts = 0 (the default) used to skip every other MoE key.
  EXPECT_THAT(error_of({"model.capacity_factor=nan"}), HasSubstr("model.capacity_factor = nan"));
  EXPECT_THAT(error_of({"model.capacity_factor=inf"}), HasSubstr("model.capacity_factor = inf"));
  EXPECT_THAT(error_of({"model.aux_loss_coef=nan"}), HasSubstr("model.aux_loss_coef = nan"));
  EXPECT_THAT(error_of({"model.aux_loss_coef=-1"}), HasSubstr("model.aux_loss_coef = -1"));
  EXPECT_THAT(error_of({"model.moe_top_k=3"}), HasSubstr("model.moe_top_k = 3: allowed values"));
  EXPECT_THAT(error_of({"model.moe_every=0"}), HasSubstr("model.moe_every = 0"));
  EXPECT_EQ(error_of({"model.capacity_factor=0"}), "") << "<= 0 means dropless";
}

TEST(ConfigBounds, PsAggregateIsARangeAndNeedsSspOrAsp) {
  EXPECT_THAT(error_of({"ps.aggregate=0"}), HasSubstr("ps.aggregate = 0"));
  EXPECT_THAT(error_of({"sync.method=ps", "ps.aggregate=2"}),
              HasSubstr("ps.aggregate = 2: applies to ps.consistency = \"ssp\" or \"asp\""));
  EXPECT_EQ(error_of({"sync.method=ps", "ps.consistency=asp", "ps.aggregate=2"}), "");
}

// Every key of the schema whose value is a float, found from the resolved config: a key that
// takes nan through --set is a float key.
std::vector<std::string> float_keys() {
  std::vector<std::string> keys;
  std::istringstream in(Config{}.to_toml());
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.size() > 2 && line[0] == '[') section = line.substr(1, line.size() - 2);
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    const std::string key = section + "." + line.substr(0, eq);
    // A string key takes any bare word on the command line (nan too): skip quoted values.
    if (line.compare(eq + 3, 1, "\"") == 0) continue;
    try {
      parse_config("", "t", {key + "=1.5"});
      keys.push_back(key);
    } catch (const ConfigError&) {
      // not a float: an integer, a flag, a list
    }
  }
  return keys;
}

TEST(ConfigBounds, EveryFloatKeyRefusesNanAndInfinity) {
  const std::vector<std::string> keys = float_keys();
  EXPECT_GE(keys.size(), 20u);
  for (const std::string& key : keys) {
    for (const char* v : {"nan", "inf", "-inf"}) {
      EXPECT_THAT(error_of({key + "=" + v}), HasSubstr(key + " = ")) << key << " = " << v;
    }
  }
}

}  // namespace
}  // namespace brigade
