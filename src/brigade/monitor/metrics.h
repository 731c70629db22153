#pragma once
// metrics.jsonl: one JSON object per line, written with one write(2) per record, so a crashed
// run keeps every step it finished and tools can tail the file while training runs. A record
// that cannot be written (a full disk) is counted and cut off again, never half-written.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "brigade/base/file_io.h"

namespace brigade {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  explicit MetricsWriter(const std::string& path);  // appends; throws IoError
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Appends the record; false (and failures() grows) if it could not be written, with the
  // reason in last_error(). A no-op returning true when not opened.
  bool write(const nlohmann::json& record);
  int64_t failures() const { return failures_; }
  const std::string& last_error() const { return last_error_; }

 private:
  std::unique_ptr<AppendFile> file_;
  int64_t failures_ = 0;
  std::string last_error_;
};

}  // namespace brigade
