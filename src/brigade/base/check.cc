#include "brigade/base/check.h"

#include <cstdio>
#include <cstdlib>

namespace brigade::detail {

namespace {
int g_log_rank = 0;
}

void set_log_rank(int rank) {
  g_log_rank = rank;
}
int log_rank() {
  return g_log_rank;
}

CheckFailure::CheckFailure(const char* file, int line, const char* cond) {
  stream_ << "[rank " << g_log_rank << "] " << file << ":" << line << ": check failed: " << cond
          << " ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "%s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace brigade::detail
