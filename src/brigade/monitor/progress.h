#pragma once
// The human-facing progress display of rank 0: on a terminal one line rewritten in place
// (step/total, loss, tokens/s, ETA); otherwise a plain line every `every` steps.
#include <cstdint>
#include <string>

namespace brigade {

// Set to "1" by `brigade launch` for its workers when its own stderr is a terminal: the
// worker's stderr is then a pipe, but its progress line is drawn live all the same, and the
// launcher keeps it in place (runtime/live_terminal.h).
inline constexpr const char* kLiveProgressEnv = "BRIGADE_LIVE_PROGRESS";

struct StepSummary {
  int64_t step = 0;  // 1-based: steps completed
  int64_t total = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double ms_per_step = 0;
  double eta_s = 0;
};

class Progress {
 public:
  // Detects whether stderr is a terminal (or kLiveProgressEnv says the launcher's is).
  explicit Progress(int64_t every);
  // Draws the terminal line (if on a terminal) and returns the plain line when one is due
  // for the log (every `every` steps, the first and the last), else "".
  std::string update(const StepSummary& s);
  bool on_terminal() const { return tty_; }
  // Ends the in-place line before other output.
  void interrupt();

 private:
  bool tty_;
  int64_t every_;
  bool drawn_ = false;
};

std::string format_duration(double seconds);  // "1h02m", "3m05s", "12s"

}  // namespace brigade
