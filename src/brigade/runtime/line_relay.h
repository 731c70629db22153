#pragma once
// Copies one output stream of a worker to the launcher's own, a line at a time, each line
// prefixed "[rank R] " so that interleaved output of many workers stays readable. A line that
// already starts with "[rank " (brigade's own log lines and failed checks) passes unchanged.
// The launcher relays rank 0's stdout without a prefix: it is the job's data (generate's JSON
// lines, check-config's TOML), which a pipe must read as the command alone writes it; brigade
// logs to stderr.
//
// Live lines: a worker that draws a progress line in place writes "\r\033[K<text>" again and
// again without a newline. With a live sink, each such redraw is passed on at once as the new
// live text (prefixed); the newline that finally ends it makes its last text an ordinary line.
// Without one, only the last text reaches the output, as one line, when the newline comes.
#include <functional>
#include <string>
#include <string_view>

namespace brigade {

class LineRelay {
 public:
  // A line longer than this is cut and its rest relayed as a new line, so that a worker
  // writing without newlines cannot grow the launcher's memory without bound.
  static constexpr size_t kMaxLine = 64 * 1024;

  // `sink` receives whole prefixed lines, each ending in '\n'; `live`, if given, every redraw of
  // a live line (prefixed, no '\n').
  // prefix = false: lines pass as they are (rank 0's stdout).
  LineRelay(int rank, std::function<void(std::string_view)> sink,
            std::function<void(std::string_view)> live = nullptr, bool prefix = true);

  // Takes the next bytes of the stream and relays every line they complete.
  void feed(std::string_view bytes);

  // Relays a pending partial line (ending it with '\n'); call at end of stream.
  void flush();

 private:
  void emit(std::string_view line);
  // Keeps only what follows the last '\r' of the pending text (and its erase sequence), and
  // passes it to live_.
  void redraw();

  std::string prefix_;
  std::function<void(std::string_view)> sink_;
  std::function<void(std::string_view)> live_;
  std::string pending_;
  bool in_live_line_ = false;  // the pending line was drawn in place (it had a '\r')
  std::string out_;            // reused buffer for the prefixed line
};

}  // namespace brigade
