#pragma once
// The records of a run's metrics.jsonl (docs/metrics.md), for the tests that read runs back:
// every record, or only those of one type ("train", "eval", "event", "summary").
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::testing {

inline std::vector<nlohmann::json> metrics_records(const std::string& path,
                                                   std::string_view type = "") {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (type.empty() || j.value("type", "") == type) out.push_back(std::move(j));
  }
  return out;
}

// One field of every "train" record of a metrics.jsonl, step by step ("loss", "grad_norm", ...).
inline std::vector<double> train_series(const std::string& path, const char* key = "loss") {
  std::vector<double> out;
  for (const nlohmann::json& j : metrics_records(path, "train")) out.push_back(j.at(key));
  return out;
}

}  // namespace brigade::testing
