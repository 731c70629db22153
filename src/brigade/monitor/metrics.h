#pragma once
// metrics.jsonl: one JSON object per line, flushed per record, so a crashed run keeps every
// step it finished and tools can tail the file while training runs.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace brigade {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  explicit MetricsWriter(const std::string& path);  // appends; throws IoError
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  void write(const nlohmann::json& record);  // no-op when not opened

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace brigade
