// Checkpoints written before format 3 keep loading: data-parallel runs saved each optimizer
// state buffer as one flat tensor ("adamw.m", shape (num_params,), in layout order, cut into
// ZeRO ranges), while every layout now reads it per tensor ("adamw.m/<tensor>", any region).
// The legacy checkpoint is made as the old code wrote it (docs/checkpoints.md, format 2): a
// sharded save of the flat pieces whose manifest is the unsealed JSON with format_version 2.
// The reference is the flat vector itself, sliced at each tensor's offset.
#include <gtest/gtest.h>

#include <numeric>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/ckpt/manifest.h"
#include "brigade/ckpt/sharded_save.h"
#include "brigade/comm/comm_factory.h"
#include "brigade/tensor/param_spec.h"
#include "brigade/train/checkpointing.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

ParamLayout small_layout() {
  ParamLayout layout;
  for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"wte.weight", {4, 3}}, {"h.0.ln_1.bias", {5}}, {"h.0.mlp.c_fc.weight", {2, 4}}}) {
    ParamSpec s;
    s.name = name;
    s.shape = shape;
    layout.add(std::move(s));
  }
  return layout;  // 12 + 5 + 8 = 25 floats
}

// Saves "adamw.m" (25,) as two ZeRO ranges [0, 10) and [10, 25), the old way, plus one
// parameter, and rewrites the manifest as format 2 wrote it.
std::string save_legacy(const std::string& root, const std::vector<float>& flat) {
  auto comm = create_communicator(CommOptions{});
  std::vector<float> wte(12, 0.5f);
  const std::vector<ShardPiece> pieces = {
      {"wte.weight", {4, 3}, StDtype::kF32, Region::whole({4, 3})},
      {"adamw.m", {25}, StDtype::kF32, Region::range(0, 10)},
      {"adamw.m", {25}, StDtype::kF32, Region::range(10, 25)}};
  ShardedCheckpointSaver saver(root, *comm, pieces);
  const std::vector<const void*> data = {wte.data(), flat.data(), flat.data() + 10};
  const SaveResult r = saver.save(7, data, {{"step", 7}, {"updates", 7}});
  EXPECT_TRUE(r.ok) << r.error;
  const std::string path = r.dir + "/" + kManifestFileName;
  nlohmann::json j = nlohmann::json::parse(read_file(path));
  j.erase("manifest_crc32");
  j["format_version"] = kLegacyShardedFormatVersion;
  write_file_atomic(path, j.dump(2) + "\n");
  return r.dir;
}

TEST(LegacyCheckpoint, FlatOptimizerStateLoadsPerTensorUnderAnyRegion) {
  testing::TempDir root;
  std::vector<float> flat(25);
  std::iota(flat.begin(), flat.end(), 100.0f);
  save_legacy(root.path(), flat);
  const ParamLayout layout = small_layout();

  // A tp-style box of wte's state, a flat range of the bias's, the whole fc weight's.
  std::vector<float> wte_rows(6), bias_tail(3), fc(8);
  const std::vector<StatePiece> pieces = {
      {{"adamw.m/wte.weight", {4, 3}, StDtype::kF32, Region::box({2, 0}, {2, 3})}, wte_rows.data()},
      {{"adamw.m/h.0.ln_1.bias", {5}, StDtype::kF32, Region::range(2, 5)}, bias_tail.data()},
      {{"adamw.m/h.0.mlp.c_fc.weight", {2, 4}, StDtype::kF32, Region::whole({2, 4})}, fc.data()}};

  // Without the layout the per-tensor names are simply not in the checkpoint.
  EXPECT_THROW(load_latest_checkpoint(root.path(), nullptr, pieces), CheckpointError);

  const auto saved =
      load_latest_checkpoint(root.path(), nullptr, pieces, nullptr, {}, nullptr, &layout);
  ASSERT_TRUE(saved.has_value());
  EXPECT_EQ(saved->updates, 7);
  EXPECT_EQ(wte_rows, std::vector<float>(flat.begin() + 6, flat.begin() + 12));
  EXPECT_EQ(bias_tail, std::vector<float>(flat.begin() + 14, flat.begin() + 17));
  EXPECT_EQ(fc, std::vector<float>(flat.begin() + 17, flat.end()));  // spans both old ranges
}

// A flat tensor that is not the layout's size is not viewed: the run's layout differs from the
// one that wrote it, and the error names the missing tensor instead of reading wrong offsets.
TEST(LegacyCheckpoint, FlatStateOfAnotherSizeIsNotReinterpreted) {
  testing::TempDir root;
  std::vector<float> flat(25, 1.0f);
  save_legacy(root.path(), flat);
  ParamLayout bigger = small_layout();
  ParamSpec extra;
  extra.name = "ln_f.weight";
  extra.shape = {3};
  bigger.add(extra);
  std::vector<float> out(3);
  const std::vector<StatePiece> pieces = {
      {{"adamw.m/ln_f.weight", {3}, StDtype::kF32, Region::whole({3})}, out.data()}};
  try {
    load_latest_checkpoint(root.path(), nullptr, pieces, nullptr, {}, nullptr, &bigger);
    FAIL() << "read a flat tensor of 25 floats as a layout of 28";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("adamw.m/ln_f.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace brigade
