#include "brigade/runtime/config_diff.h"

#include <map>
#include <sstream>

namespace brigade {

namespace {

// "section.key" -> value, in order, from resolved TOML as to_toml writes it.
std::vector<std::pair<std::string, std::string>> resolved_values(const Config& config) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(config.to_toml());
  std::string section;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line.front() == '[') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const size_t eq = line.find(" = ");
    if (eq != std::string::npos)
      out.emplace_back(section + "." + line.substr(0, eq), line.substr(eq + 3));
  }
  return out;
}

}  // namespace

std::vector<ConfigChange> config_changes(const std::string& saved_toml, const Config& now) {
  const Config saved = parse_config(saved_toml, "the checkpoint's config");
  std::map<std::string, std::string> was;
  for (auto& [key, value] : resolved_values(saved)) was[key] = value;
  std::vector<ConfigChange> changes;
  for (auto& [key, value] : resolved_values(now)) {
    const auto it = was.find(key);
    if (it != was.end() && it->second != value) changes.push_back({key, it->second, value});
  }
  return changes;
}

std::string describe_changes(const std::vector<ConfigChange>& changes) {
  std::string out;
  for (const ConfigChange& c : changes) {
    out += (out.empty() ? "" : ", ") + c.key + " " + c.was + " -> " + c.now;
  }
  return out;
}

}  // namespace brigade
