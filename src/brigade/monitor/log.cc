#include "brigade/monitor/log.h"

#include "brigade/base/error.h"
#include "brigade/monitor/utc_time.h"

namespace brigade {

Log::Log(int rank, const std::string& path, bool echo) : rank_(rank), echo_(echo) {
  if (!path.empty()) open_file(path);
}

Log::~Log() {
  if (file_) std::fclose(file_);
}

void Log::open_file(const std::string& path) {
  if (file_) std::fclose(file_);
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw IoError("cannot open log file " + path);
}

void Log::line(const std::string& text) {
  if (echo_) std::fprintf(stderr, "[rank %d] %s\n", rank_, text.c_str());
  file_only(text);
}

// The file's lines carry the time (the terminal's do not: a person watching knows it).
void Log::file_only(const std::string& text) {
  if (!file_) return;
  std::fprintf(file_, "%s [rank %d] %s\n", utc_now_iso8601().c_str(), rank_, text.c_str());
  std::fflush(file_);
}

}  // namespace brigade
