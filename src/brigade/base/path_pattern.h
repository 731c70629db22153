#pragma once
// Config paths that name one file per participant: every `placeholder` in `pattern` ("{client}"
// in fed.client_data, "{rank}" in comm.key) replaced by the participant's index.
#include <cstdint>
#include <string>
#include <string_view>

namespace brigade {

inline std::string fill_placeholder(std::string pattern, std::string_view placeholder,
                                    int64_t index) {
  const std::string value = std::to_string(index);
  for (size_t at = pattern.find(placeholder); at != std::string::npos;
       at = pattern.find(placeholder, at + value.size())) {
    pattern.replace(at, placeholder.size(), value);
  }
  return pattern;
}

}  // namespace brigade
