#include "brigade/runtime/live_terminal.h"

#include <unistd.h>

#include <cerrno>

namespace brigade {

namespace {

constexpr std::string_view kClear = "\r\033[K";  // to the line's start, erase it

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal is gone: nothing to tell it
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

void LiveTerminal::line(int fd, std::string_view text) {
  if (!live_.empty()) write_all(fd_, kClear);
  write_all(fd, text);
  if (!live_.empty()) write_all(fd_, live_);
}

void LiveTerminal::live(std::string_view text) {
  live_.assign(text);
  write_all(fd_, kClear);
  write_all(fd_, live_);
}

void LiveTerminal::finish() {
  if (live_.empty()) return;
  write_all(fd_, "\n");
  live_.clear();
}

}  // namespace brigade
