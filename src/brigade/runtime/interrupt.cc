#include "brigade/runtime/interrupt.h"

#include <signal.h>

#include <atomic>

namespace brigade {

namespace {

std::atomic<int> g_signal{0};
struct sigaction g_previous[2];
constexpr int kSignals[2] = {SIGINT, SIGTERM};

extern "C" void on_interrupt(int signo) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, signo)) {
    // The second signal: its default action, now.
    ::signal(signo, SIG_DFL);
    ::raise(signo);
  }
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal = 0;
  struct sigaction a = {};
  a.sa_handler = on_interrupt;
  sigemptyset(&a.sa_mask);
  a.sa_flags = SA_RESTART;  // a blocking read or poll goes on; the loop looks after the step
  for (int i = 0; i < 2; ++i) ::sigaction(kSignals[i], &a, &g_previous[i]);
}

InterruptGuard::~InterruptGuard() {
  for (int i = 0; i < 2; ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
}

int interrupt_signal() {
  return g_signal.load();
}

}  // namespace brigade
