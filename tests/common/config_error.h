#pragma once
// What Config::validate() says of the default config with `overrides` ("section.key=value"),
// or "" when it accepts them: for tests that check each invalid value names its key.
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/runtime/config.h"

namespace brigade::testing {

inline std::string config_error_of(const std::vector<std::string>& overrides) {
  try {
    Config c = parse_config("", "test.toml", overrides);
    c.validate();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace brigade::testing
