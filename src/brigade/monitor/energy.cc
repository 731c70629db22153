#include "brigade/monitor/energy.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <string_view>

namespace brigade {

namespace {

// A whole-number file of sysfs ("123456\n"), or nullopt.
std::optional<uint64_t> read_counter(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!in || !std::getline(in, text)) return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  return v;
}

// "intel-rapl:<digits>" with no further ":" (a package, not one of its sub-zones).
bool is_package_zone(std::string_view name) {
  constexpr std::string_view kPrefix = "intel-rapl:";
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size()) return false;
  for (char c : name.substr(kPrefix.size())) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

RaplReader::RaplReader(std::string root) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    if (!is_package_zone(entry.path().filename().string())) continue;
    Domain d{.energy_path = entry.path().string() + "/energy_uj"};
    const auto now = read_counter(d.energy_path);
    const auto range = read_counter(entry.path().string() + "/max_energy_range_uj");
    if (!now || !range || *range == 0) continue;  // unreadable (root-only) or malformed
    d.last_uj = *now;
    d.max_range_uj = *range;
    domains_.push_back(d);
  }
}

std::optional<double> RaplReader::joules_since_last() {
  if (domains_.empty()) return std::nullopt;
  double joules = 0;
  for (Domain& d : domains_) {
    const auto now = read_counter(d.energy_path);
    if (!now || *now > d.max_range_uj) return std::nullopt;
    // The counter runs from 0 to max_energy_range_uj and starts again at 0.
    const uint64_t delta = *now >= d.last_uj ? *now - d.last_uj : d.max_range_uj - d.last_uj + *now;
    d.last_uj = *now;
    joules += static_cast<double>(delta) * 1e-6;
  }
  return joules;
}

double estimated_joules(double busy_s, int64_t threads, double core_watts) {
  return busy_s * static_cast<double>(threads) * core_watts;
}

}  // namespace brigade
