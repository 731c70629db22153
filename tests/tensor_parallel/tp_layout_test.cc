// The tensor-parallel GPT layout: which elements of the tp = 1 tensors each rank holds (checked
// against formulas written out here), that the shards partition every tensor, that every rank
// initialises to exactly the slice of the tp = 1 initialisation, the vocab padding, and the
// rejection of shapes that do not divide.
#include "brigade/model/tp/tp_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/model/gpt_layout.h"

namespace brigade {
namespace {

const GptConfig kCfg{.vocab = 13, .seq_len = 8, .d_model = 16, .n_layer = 2, .n_head = 4};

ParamLayout layout_for(const GptConfig& c, int tp, int rank) {
  ParamLayout layout;
  std::vector<ParamGroup> groups;
  build_gpt_layout(c, make_gpt_shard(c, tp, rank), layout, groups);
  return layout;
}

TEST(TpLayout, VocabIsPaddedToAMultipleOfTp) {
  const GptShard s = make_gpt_shard(kCfg, 4, 3);
  EXPECT_EQ(s.vocab_padded, 16);
  EXPECT_EQ(s.vocab_local, 4);
  EXPECT_EQ(s.vocab_begin, 12);
  EXPECT_EQ(s.heads_local, 1);
  EXPECT_EQ(s.c_local, 4);
  EXPECT_EQ(s.fc_local, 16);
  EXPECT_EQ(make_gpt_shard(kCfg, 1, 0).vocab_padded, 13);
}

// c_attn's rows are [q | k | v], each C rows in head order; rank r must hold rows
// [r*C/tp, (r+1)*C/tp) of each of the three, in that order. c_proj (attention) holds the same
// columns. Written out independently of ParamSpec::full_index.
TEST(TpLayout, AttentionShardsAreTheRanksHeads) {
  const int64_t C = kCfg.d_model;
  for (int tp : {2, 4}) {
    const int64_t Cl = C / tp;
    for (int r = 0; r < tp; ++r) {
      const ParamLayout local = layout_for(kCfg, tp, r);
      const ParamSpec& w = local.at("h.1.attn.c_attn.weight");
      ASSERT_EQ(w.shape, (std::vector<int64_t>{3 * Cl, C}));
      for (int64_t i = 0; i < 3 * Cl; ++i) {
        const int64_t part = i / Cl, full_row = part * C + r * Cl + i % Cl;
        for (int64_t j = 0; j < C; ++j) EXPECT_EQ(w.full_index(i * C + j), full_row * C + j);
      }
      const ParamSpec& b = local.at("h.0.attn.c_attn.bias");
      for (int64_t i = 0; i < 3 * Cl; ++i)
        EXPECT_EQ(b.full_index(i), (i / Cl) * C + r * Cl + i % Cl);
      const ParamSpec& proj = local.at("h.0.attn.c_proj.weight");
      ASSERT_EQ(proj.shape, (std::vector<int64_t>{C, Cl}));
      for (int64_t i = 0; i < C; ++i)
        for (int64_t j = 0; j < Cl; ++j) EXPECT_EQ(proj.full_index(i * Cl + j), i * C + r * Cl + j);
      const ParamSpec& wte = local.at("wte.weight");
      const int64_t Vl = (kCfg.vocab + tp - 1) / tp;
      for (int64_t i = 0; i < Vl; ++i) {
        const int64_t row = r * Vl + i;
        EXPECT_EQ(wte.full_index(i * C + 1), row < kCfg.vocab ? row * C + 1 : -1);
      }
    }
  }
}

// Over all ranks, every element of every split tensor is held exactly once, and replicated
// tensors are whole on every rank.
TEST(TpLayout, ShardsPartitionEveryTensor) {
  const ParamLayout full = layout_for(kCfg, 1, 0);
  for (int tp : {2, 4}) {
    std::vector<int> seen(static_cast<size_t>(full.total()), 0);
    int64_t padding = 0;
    for (int r = 0; r < tp; ++r) {
      const ParamLayout local = layout_for(kCfg, tp, r);
      ASSERT_EQ(local.specs().size(), full.specs().size());
      for (const ParamSpec& s : local.specs()) {
        const ParamSpec& f = full.at(s.name);
        EXPECT_EQ(s.tp_split, f.tp_split) << s.name;
        for (int64_t i = 0; i < s.numel; ++i) {
          const int64_t j = s.full_index(i);
          if (j < 0) {
            ++padding;
            continue;
          }
          ASSERT_LT(j, f.numel) << s.name;
          ++seen[static_cast<size_t>(f.offset + j)];
        }
      }
    }
    for (const ParamSpec& f : full.specs()) {
      const int want = f.tp_split == TpSplit::kReplicated ? tp : 1;
      for (int64_t j = 0; j < f.numel; ++j)
        ASSERT_EQ(seen[static_cast<size_t>(f.offset + j)], want) << f.name << " element " << j;
    }
    const int64_t vp = (kCfg.vocab + tp - 1) / tp * tp;
    EXPECT_EQ(padding, (vp - kCfg.vocab) * kCfg.d_model) << "tp " << tp;
  }
}

TEST(TpLayout, EveryRankInitialisesToTheSliceOfTheTp1Weights) {
  const ParamLayout full = layout_for(kCfg, 1, 0);
  std::vector<float> full_init(static_cast<size_t>(full.total()));
  full.initialize(full_init.data(), 42);
  for (int tp : {2, 4}) {
    std::vector<float> assembled(full_init.size(), -7.0f);
    for (int r = 0; r < tp; ++r) {
      const ParamLayout local = layout_for(kCfg, tp, r);
      std::vector<float> init(static_cast<size_t>(local.total()), -1.0f);
      local.initialize(init.data(), 42);
      std::vector<float> want(init.size());
      slice_from_full(local, full, full_init.data(), want.data());
      for (size_t i = 0; i < init.size(); ++i) ASSERT_EQ(init[i], want[i]) << "element " << i;
      // Padding rows (wte rows >= vocab) are zero.
      const ParamSpec& wte = local.at("wte.weight");
      for (int64_t i = 0; i < wte.numel; ++i)
        if (wte.full_index(i) < 0) {
          ASSERT_EQ(init[static_cast<size_t>(wte.offset + i)], 0.0f);
        }
      scatter_into_full(local, full, init.data(), assembled.data(), /*write_replicated=*/r == 0);
    }
    EXPECT_EQ(assembled, full_init) << "tp " << tp;
  }
}

void expect_rejected(const GptConfig& c, int tp, bool sp, const std::vector<std::string>& parts) {
  try {
    validate_tensor_parallel(c, tp, sp);
    ADD_FAILURE() << "tp " << tp << " accepted";
  } catch (const ConfigError& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(TpLayout, ShapesThatDoNotDivideAreRejectedNamingTheFactor) {
  GptConfig c = kCfg;
  c.n_head = 2;
  c.d_model = 6;
  expect_rejected(c, 4, false, {"model.n_head = 2", "parallel.tp = 4"});
  expect_rejected(c, 16, false, {"model.n_head = 2", "4 * model.d_model = 24", "parallel.tp = 16"});
  expect_rejected(kCfg, 3, true, {"model.seq_len = 8", "model.n_head = 4", "parallel.tp = 3"});
  expect_rejected(kCfg, 0, false, {"parallel.tp = 0"});
  EXPECT_THROW(make_gpt_shard(kCfg, 3, 0), ConfigError);
  EXPECT_NO_THROW(validate_tensor_parallel(kCfg, 4, true));
  // The vocab (13) never needs to divide: it is padded.
  EXPECT_NO_THROW(validate_tensor_parallel(kCfg, 2, false));
}

}  // namespace
}  // namespace brigade
