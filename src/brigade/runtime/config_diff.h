#pragma once
// What changed between the config a checkpoint was saved with and the config a run resumes
// with, key by key, for the line a resumed run logs (docs/configuration.md, "Resuming").
#include <string>
#include <vector>

#include "brigade/runtime/config.h"

namespace brigade {

struct ConfigChange {
  std::string key;  // "train.lr"
  std::string was;  // as TOML: "0.002", "\"adamw\""
  std::string now;
};

// The keys whose resolved values differ, in the schema's order. saved_toml is the resolved
// config a checkpoint holds (Config::to_toml). ConfigError if it does not parse.
std::vector<ConfigChange> config_changes(const std::string& saved_toml, const Config& now);

// "train.lr 0.002 -> 0.001, train.steps 600 -> 1200".
std::string describe_changes(const std::vector<ConfigChange>& changes);

}  // namespace brigade
