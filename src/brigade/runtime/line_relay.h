#pragma once
// Copies one output stream of a worker to the launcher's own, a line at a time, each line
// prefixed "[rank R] " so that interleaved output of many workers stays readable. A line that
// already starts with "[rank " (brigade's own log lines and failed checks) passes unchanged.
#include <functional>
#include <string>
#include <string_view>

namespace brigade {

class LineRelay {
 public:
  // A line longer than this is cut and its rest relayed as a new line, so that a worker
  // writing without newlines cannot grow the launcher's memory without bound.
  static constexpr size_t kMaxLine = 64 * 1024;

  // `sink` receives whole prefixed lines, each ending in '\n'.
  LineRelay(int rank, std::function<void(std::string_view)> sink);

  // Takes the next bytes of the stream and relays every line they complete.
  void feed(std::string_view bytes);

  // Relays a pending partial line (ending it with '\n'); call at end of stream.
  void flush();

 private:
  void emit(std::string_view line);

  std::string prefix_;
  std::function<void(std::string_view)> sink_;
  std::string pending_;
  std::string out_;  // reused buffer for the prefixed line
};

}  // namespace brigade
