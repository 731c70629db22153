// LineRelay: bytes in arbitrary pieces become whole lines, each with the rank prefix unless
// already prefixed; partial lines come out on flush; overlong lines are cut.
#include "brigade/runtime/line_relay.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace brigade {
namespace {

struct Collected {
  std::vector<std::string> lines;
  LineRelay relay;
  explicit Collected(int rank)
      : relay(rank, [this](std::string_view s) { lines.emplace_back(s); }) {}
};

TEST(LineRelay, PrefixesWholeLinesWhateverThePieces) {
  const std::string text = "alpha\n\n[rank 3] own line\nbeta gamma\n[rankless\ntail";
  const std::vector<std::string> expected = {"[rank 2] alpha\n",     "[rank 2] \n",
                                             "[rank 3] own line\n",  "[rank 2] beta gamma\n",
                                             "[rank 2] [rankless\n", "[rank 2] tail\n"};
  for (size_t piece : {1u, 2u, 3u, 7u, 1000u}) {
    Collected c(2);
    for (size_t i = 0; i < text.size(); i += piece) {
      c.relay.feed(std::string_view(text).substr(i, piece));
    }
    EXPECT_EQ(c.lines.size(), 5u) << "the partial line must wait for flush, piece " << piece;
    c.relay.flush();
    EXPECT_EQ(c.lines, expected) << "piece " << piece;
    c.relay.flush();  // nothing pending: nothing more
    EXPECT_EQ(c.lines.size(), expected.size());
  }
}

TEST(LineRelay, CutsOverlongLines) {
  Collected c(0);
  const size_t cap = LineRelay::kMaxLine;
  std::string line(cap * 2 + 10, 'x');
  c.relay.feed(line.substr(0, 5));
  c.relay.feed(line.substr(5) + "\nnext\n");
  ASSERT_EQ(c.lines.size(), 4u);
  EXPECT_EQ(c.lines[0], "[rank 0] " + std::string(cap, 'x') + "\n");
  EXPECT_EQ(c.lines[1], "[rank 0] " + std::string(cap, 'x') + "\n");
  EXPECT_EQ(c.lines[2], "[rank 0] " + std::string(10, 'x') + "\n");
  EXPECT_EQ(c.lines[3], "[rank 0] next\n");

  // A line of exactly the cap is one line, with no empty line after it.
  Collected d(1);
  d.relay.feed(std::string(cap, 'y'));
  d.relay.feed("\n");
  ASSERT_EQ(d.lines.size(), 1u);
  EXPECT_EQ(d.lines[0], "[rank 1] " + std::string(cap, 'y') + "\n");
}

// A progress line redrawn in place ("\r\033[K" + text, no newline): each redraw that arrives
// reaches the live sink at once, whatever the pieces (even the erase sequence split in two);
// the newline that ends it makes the last text a line.
TEST(LineRelay, LiveLinesArePassedOnAsTheyAreRedrawn) {
  const std::string text = "\r\033[Kstep 1/3\r\033[Kstep 2/3\r\033[Kstep 3/3\ncheckpoint\n";
  for (size_t piece : {1u, 4u, 1000u}) {
    std::vector<std::string> lines, live;
    LineRelay relay(
        0, [&](std::string_view s) { lines.emplace_back(s); },
        [&](std::string_view s) { live.emplace_back(s); });
    for (size_t i = 0; i < text.size(); i += piece) {
      relay.feed(std::string_view(text).substr(i, piece));
    }
    EXPECT_EQ(lines, (std::vector<std::string>{"[rank 0] step 3/3\n", "[rank 0] checkpoint\n"}))
        << "piece " << piece;
    ASSERT_FALSE(live.empty());
    EXPECT_EQ(live.back(), "[rank 0] step 3/3") << "piece " << piece;
    // Redraws that arrive in one read are one: only the newest is worth drawing.
    if (piece >= text.size()) continue;
    for (const char* want : {"[rank 0] step 1/3", "[rank 0] step 2/3"}) {
      EXPECT_NE(std::find(live.begin(), live.end(), want), live.end())
          << want << ", piece " << piece;
    }
  }
}

// Without a live sink a redrawn line is one line with its last text, not every redraw.
TEST(LineRelay, LiveLinesWithoutALiveSinkBecomeTheirLastText) {
  Collected c(1);
  c.relay.feed("\r\033[Kstep 1/2\r\033[Kstep 2/2\n");
  EXPECT_EQ(c.lines, std::vector<std::string>{"[rank 1] step 2/2\n"});
}

}  // namespace
}  // namespace brigade
