#include "brigade/monitor/summary_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "brigade/base/json_limits.h"

namespace brigade {

namespace {

std::string value_text(const nlohmann::json& v) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) return fmt::format("{}", d);
    const double a = std::abs(d);
    return a != 0 && (a < 1e-3 || a >= 1e7) ? fmt::format("{:.4g}", d) : fmt::format("{:.4f}", d);
  }
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array() &&
      std::all_of(v.begin(), v.end(), [](const auto& x) { return x.is_number(); })) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + value_text(v[i]);
    return s + "]";
  }
  return json_excerpt(v, 200);
}

}  // namespace

std::vector<std::string> summary_table(const nlohmann::json& summary) {
  std::vector<std::string> rows;
  if (!summary.is_object()) return rows;
  size_t width = 0;
  for (const auto& [key, v] : summary.items()) width = std::max(width, key.size());
  for (const auto& [key, v] : summary.items()) {
    const std::string text = value_text(v);
    const size_t eol = text.find('\n');
    if (eol == std::string::npos) {
      rows.push_back(fmt::format("  {:<{}}  {}", key, width, text));
      continue;
    }
    rows.push_back(fmt::format("  {}:", key));
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      if (end > at) rows.push_back("    " + text.substr(at, end - at));
      at = end + 1;
    }
  }
  return rows;
}

}  // namespace brigade
