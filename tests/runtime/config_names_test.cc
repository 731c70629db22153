// Config errors name where the bad text came from (the file, or the --set override that set the
// key) and suggest the nearest known name; a missing config file is a missing file (exit 3).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/base/nearest_name.h"
#include "brigade/runtime/config.h"

namespace brigade {
namespace {

std::string error_of(const std::string& toml, const std::vector<std::string>& overrides) {
  try {
    parse_config(toml, "job.toml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ConfigNamesTest, EditDistanceAgainstHandCounts) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("steps", "steps"), 0u);
  EXPECT_EQ(edit_distance("stpes", "steps"), 2u);  // a swap is two substitutions
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("lr", ""), 2u);
  EXPECT_EQ(nearest_name("trian", {"train", "tokenize"}), "train");
  EXPECT_EQ(nearest_name("xyz", {"train", "tokenize"}), "");
  EXPECT_EQ(nearest_name("a", {"b"}), "");  // as many edits as letters: no hint
}

TEST(ConfigNamesTest, AnOverrideIsNamedNotTheFile) {
  const std::string typo = error_of("[train]\nsteps = 5\n", {"train.stpes=5"});
  EXPECT_EQ(
      typo.rfind("--set train.stpes=5: unknown key train.stpes; did you mean train.steps?", 0), 0u)
      << typo;
  const std::string type = error_of("", {"train.steps=abc"});
  EXPECT_NE(type.find("in --set train.steps=abc"), std::string::npos) << type;
  EXPECT_EQ(type.find("job.toml"), std::string::npos) << type;
  const std::string section = error_of("", {"trian.steps=5"});
  EXPECT_NE(section.find("--set trian.steps=5: unknown section [trian]; did you mean train?"),
            std::string::npos)
      << section;
  // Every section is listed, the parameter-server and federation ones too.
  EXPECT_NE(section.find(
                "allowed: run, model, lora, data, train, parallel, sync, ps, fed, comm, monitor"),
            std::string::npos)
      << section;
}

TEST(ConfigNamesTest, AFileKeyIsNamedWithItsFile) {
  const std::string typo = error_of("[model]\nn_layers = 2\n", {});
  EXPECT_EQ(typo.rfind("job.toml: unknown key model.n_layers; did you mean model.n_layer?", 0), 0u)
      << typo;
  // The file's value overridden by --set: the override is what the run would use, so it is blamed.
  const std::string overridden = error_of("[train]\nsteps = 5\n", {"train.steps=x"});
  EXPECT_NE(overridden.find("--set train.steps=x"), std::string::npos) << overridden;
  const std::string far = error_of("[train]\nzzzzzzzz = 1\n", {});
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

TEST(ConfigNamesTest, AMissingConfigFileIsAnIoError) {
  EXPECT_THROW(load_config(std::string(BRIGADE_TEST_TMP) + "/no-such-config.toml", {}), IoError);
}

}  // namespace
}  // namespace brigade
