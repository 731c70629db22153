// LiveTerminal: a line from any rank goes above the live progress line, which is drawn again
// below it; the terminal is a pipe here, its bytes compared with what a terminal would get.
#include "brigade/runtime/live_terminal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace brigade {
namespace {

std::string drain(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(LiveTerminal, LinesGoAboveTheLiveLine) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  {
    LiveTerminal t(p[1]);
    t.line(p[1], "[rank 1] hello\n");  // no live line yet: written as it is
    t.live("[rank 0] step 1/2");
    t.live("[rank 0] step 2/2");
    t.line(p[1], "[rank 1] checkpoint\n");
    t.finish();
  }
  ::close(p[1]);
  EXPECT_EQ(drain(p[0]),
            "[rank 1] hello\n"
            "\r\033[K[rank 0] step 1/2"
            "\r\033[K[rank 0] step 2/2"
            "\r\033[K[rank 1] checkpoint\n[rank 0] step 2/2"
            "\n");
  ::close(p[0]);
}

}  // namespace
}  // namespace brigade
