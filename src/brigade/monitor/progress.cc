#include "brigade/monitor/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace brigade {

Progress::Progress(int64_t every)
    : tty_(isatty(STDERR_FILENO) == 1 ||
           (std::getenv(kLiveProgressEnv) && std::string(std::getenv(kLiveProgressEnv)) == "1")),
      every_(every) {}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string Progress::update(const StepSummary& s) {
  std::string text = fmt::format(
      "step {:>{}}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} tok/s | "
      "{:.1f} ms/step | eta {}",
      s.step, std::to_string(s.total).size(), s.total, s.loss, s.lr, s.grad_norm, s.tokens_per_s,
      s.ms_per_step, format_duration(s.eta_s));
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }
  bool log_now = s.step % every_ == 0 || s.step == s.total || s.step == 1;
  return log_now ? text : "";
}

void Progress::interrupt() {
  if (drawn_) {
    std::fputc('\n', stderr);
    drawn_ = false;
  }
}

}  // namespace brigade
