#include "brigade/monitor/metrics.h"

#include "brigade/base/error.h"

namespace brigade {

MetricsWriter::MetricsWriter(const std::string& path) {
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw IoError("cannot open metrics file " + path);
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!file_) return;
  std::string line = record.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace brigade
