// A tensor-parallel rank's checkpoint pieces (parallel/tp_state_pieces.h) against the tp = 1
// model: for tp = 2 and 3 with a vocab that is not a multiple of tp (padding rows), every rank's
// pieces, placed at their regions' flat runs, rebuild exactly the full tensors of the
// single-process layout (initialised independently from the same seed), every element once;
// the shard plan accepts them (the written pieces tile each tensor), and no padding row is
// declared.
#include "brigade/parallel/tp_state_pieces.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "brigade/ckpt/region.h"
#include "brigade/ckpt/shard_plan.h"
#include "brigade/model/gpt_layout.h"

namespace brigade {
namespace {

const GptConfig kCfg{.vocab = 67, .seq_len = 8, .d_model = 12, .n_layer = 2, .n_head = 6};
constexpr uint64_t kSeed = 9;

ParamLayout layout_of(int tp, int rank) {
  ParamLayout layout;
  std::vector<ParamGroup> groups;
  build_gpt_layout(kCfg, make_gpt_shard(kCfg, tp, rank), layout, groups);
  return layout;
}

class TpStatePieces : public ::testing::TestWithParam<int> {};

TEST_P(TpStatePieces, RanksRebuildTheFullTensorsOnce) {
  const int tp = GetParam();
  const ParamLayout full = layout_of(1, 0);
  std::vector<float> want(static_cast<size_t>(full.total()));
  full.initialize(want.data(), kSeed);

  // Every full tensor, NaN until a piece writes it; a second write is a failure.
  std::map<std::string, std::vector<float>> got;
  std::map<std::string, std::vector<int>> writes;
  for (const ParamSpec& s : full.specs()) {
    got[s.name].assign(static_cast<size_t>(s.numel), std::nanf(""));
    writes[s.name].assign(static_cast<size_t>(s.numel), 0);
  }
  std::vector<ParamLayout> layouts;
  std::vector<std::vector<float>> bufs;
  std::vector<std::vector<ShardPiece>> declared;
  for (int r = 0; r < tp; ++r) {
    layouts.push_back(layout_of(tp, r));
    bufs.emplace_back(static_cast<size_t>(layouts.back().total()));
    layouts.back().initialize(bufs.back().data(), kSeed);
  }
  for (int r = 0; r < tp; ++r) {
    std::vector<ShardPiece> mine;
    for (const StatePiece& p : tp_state_pieces(layouts[r], bufs[r].data())) {
      mine.push_back(p.piece);
      const ParamSpec& f = full.at(p.piece.tensor);
      ASSERT_EQ(p.piece.shape, f.shape) << p.piece.tensor;
      ASSERT_EQ(region_error(p.piece.region, f.shape), std::nullopt) << p.piece.tensor;
      // Replicated tensors are declared whole by every rank; count tp shards only once each.
      const bool whole = p.piece.region == Region::whole(f.shape);
      int64_t at = 0;
      for (const FlatRun& run : region_runs(p.piece.region, f.shape)) {
        for (int64_t i = run.begin; i < run.end; ++i, ++at) {
          got[f.name][static_cast<size_t>(i)] = p.data[at];
          if (!whole || r == 0) ++writes[f.name][static_cast<size_t>(i)];
        }
      }
      ASSERT_EQ(at, p.piece.region.numel()) << p.piece.tensor;
    }
    declared.push_back(std::move(mine));
  }
  for (const ParamSpec& s : full.specs()) {
    for (int64_t i = 0; i < s.numel; ++i) {
      ASSERT_EQ(writes[s.name][static_cast<size_t>(i)], 1) << s.name << " element " << i;
      ASSERT_EQ(got[s.name][static_cast<size_t>(i)], want[static_cast<size_t>(s.offset + i)])
          << s.name << " element " << i;
    }
  }
  // The plan dedups the replicated pieces and checks the tiling of the split ones.
  for (int r = 0; r < tp; ++r) EXPECT_NO_THROW(ShardPlan::from_all(r, declared));
}

INSTANTIATE_TEST_SUITE_P(Tp, TpStatePieces, ::testing::Values(2, 3));

// A prefix names optimizer state tensors after the parameter they belong to.
TEST(TpStatePiecesNames, PrefixAndPaddingRows) {
  const ParamLayout local = layout_of(2, 1);
  std::vector<float> buf(static_cast<size_t>(local.total()));
  const auto pieces = tp_state_pieces(local, buf.data(), "adamw.m/");
  bool saw_wte = false;
  for (const StatePiece& p : pieces) {
    EXPECT_EQ(p.piece.tensor.rfind("adamw.m/", 0), 0u) << p.piece.tensor;
    if (p.piece.tensor == "adamw.m/wte.weight") {
      // Rank 1 of V = 67 over tp = 2 holds rows 34..67 of the padded 68: 33 real rows.
      saw_wte = true;
      EXPECT_EQ(p.piece.region, Region::box({34, 0}, {33, kCfg.d_model}));
      EXPECT_EQ(p.data, buf.data() + local.at("wte.weight").offset);
    }
  }
  EXPECT_TRUE(saw_wte);
}

}  // namespace
}  // namespace brigade
