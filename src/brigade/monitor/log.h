#pragma once
// One line per event, prefixed with the rank, written to stderr and to the run's log file, whose
// lines also start with the UTC time ("2026-12-01T21:50:03.127Z [rank 0] ...").
#include <fmt/format.h>

#include <cstdio>
#include <string>

namespace brigade {

class Log {
 public:
  // Opens (appends to) path; an empty path logs to stderr only. echo = false keeps lines out
  // of stderr (ranks other than 0 of a job log to their file only).
  explicit Log(int rank = 0, const std::string& path = "", bool echo = true);
  ~Log();
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  void open_file(const std::string& path);
  int rank() const { return rank_; }

  void line(const std::string& text);  // "[rank r] text"
  template <typename... Args>
  void info(fmt::format_string<Args...> f, Args&&... args) {
    line(fmt::format(f, std::forward<Args>(args)...));
  }
  // Writes only to the file (the terminal shows a progress line instead).
  void file_only(const std::string& text);

 private:
  int rank_;
  bool echo_;
  std::FILE* file_ = nullptr;
};

}  // namespace brigade
