#include "brigade/monitor/metrics.h"

#include <cstring>

namespace brigade {

MetricsWriter::MetricsWriter(const std::string& path) : file_(std::make_unique<AppendFile>(path)) {}

MetricsWriter::~MetricsWriter() = default;

bool MetricsWriter::write(const nlohmann::json& record) {
  if (!file_) return true;
  if (const int err = file_->append(record.dump() + "\n")) {
    ++failures_;
    last_error_ = "cannot write " + file_->path() + ": " + std::strerror(err);
    return false;
  }
  return true;
}

}  // namespace brigade
