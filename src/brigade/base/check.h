#pragma once
// BRIGADE_CHECK(cond) << "context";  aborts with "[rank r] file:line: check failed: cond context".
// For programmer invariants only; never for data read from a file or the network.
#include <sstream>

namespace brigade::detail {

// The rank printed by failed checks and log lines; set once by the runtime at start-up.
void set_log_rank(int rank);
int log_rank();

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

}  // namespace brigade::detail

#define BRIGADE_CHECK(cond)            \
  if (__builtin_expect(!!(cond), 1)) { \
  } else                               \
    ::brigade::detail::CheckFailure(__FILE__, __LINE__, #cond)
