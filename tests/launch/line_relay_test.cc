// LineRelay: bytes in arbitrary pieces become whole lines, each with the rank prefix unless
// already prefixed; partial lines come out on flush; overlong lines are cut.
#include "brigade/runtime/line_relay.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace brigade
