#pragma once
// The launcher's terminal when it is one: the workers' lines, and rank 0's live progress line
// redrawn in place below them. A line from any rank first clears the live line, is written,
// and the live line is drawn again after it, so that progress stays at the bottom the way
// `brigade train` shows it on a terminal of its own.
#include <string>
#include <string_view>

namespace brigade {

class LiveTerminal {
 public:
  // fd receives the live line (the launcher's stderr).
  explicit LiveTerminal(int fd) : fd_(fd) {}
  // A whole line (ending in '\n') for `fd` (1 or 2).
  void line(int fd, std::string_view text);
  // Replaces the live line (no '\n').
  void live(std::string_view text);
  // Ends the live line where it is (it stays on the screen), e.g. when its worker ends.
  void finish();

 private:
  int fd_;
  std::string live_;  // drawn when not empty
};

}  // namespace brigade
