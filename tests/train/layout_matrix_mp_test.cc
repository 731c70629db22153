// One checkpoint family for every layout: a run saved under any layout continues under any
// other, through the real CLI (`brigade launch ... train`), and matches the uninterrupted run.
//
// Every layout trains the same global batch of 8 sequences per step (micro_batch 2 x
// grad_accum x data replicas), so the sampler hands every layout the same examples
// (docs/architecture.md). Each save layout trains steps 1-4 and checkpoints; its run folder is
// copied once per load layout, which resumes it and trains steps 5-8. The reference is one
// process that never stopped. Layouts differ only in the order of f32 sums (hybrid_runs.h
// measures 1e-7 relative on the loss), so we require, at each of the steps 5-8 and for the
// final validation loss, |loss - loss_ref| <= 1e-5 loss_ref, and the final weights within
// 5e-5 of the largest reference weight. A checkpoint read under the wrong layout (optimizer
// state of another tensor, a tp shard in the wrong place, state zeroed) is off by orders more.
//
// Dense matrix, 6 x 6: DDP on 2, ZeRO-3 on 4, tp 2, pp 2 (1F1B), pp 2 x tp 2, and dp 2 x tp 2
// with ZeRO-1 on the dp axis. MoE matrix, 4 x 4: 1 process, DDP on 2, ep 2, pp 2 x ep 2, with
// dropless routing and no balancing loss, so that how tokens are grouped for routing (the ep
// group routes its replicas' micro-batches together) does not change the mathematics.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "hybrid/hybrid_runs.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

struct Layout {
  std::string name;
  int nproc;
  std::string set;  // --set flags; grad_accum makes the global batch 8
};

const std::vector<Layout> kDense = {
    {"ddp2", 2, "--set train.grad_accum=2"},
    {"zero3x4", 4, "--set train.grad_accum=1 --set parallel.zero=3"},
    {"tp2", 2, "--set train.grad_accum=4 --set parallel.tp=2"},
    {"pp2", 2, "--set train.grad_accum=4 --set parallel.pp=2"},
    {"pp2tp2", 4, "--set train.grad_accum=4 --set parallel.pp=2 --set parallel.tp=2"},
    {"dp2tp2z1", 4, "--set train.grad_accum=2 --set parallel.tp=2 --set parallel.zero=1"},
};

const char* kMoe =
    "--set model.n_experts=4 --set model.moe_every=2 --set model.moe_top_k=2 "
    "--set model.capacity_factor=0 --set model.aux_loss_coef=0 ";

const std::vector<Layout> kMoeLayouts = {
    {"moe1", 1, "--set train.grad_accum=4"},
    {"moeddp2", 2, "--set train.grad_accum=2"},
    {"ep2", 2, "--set train.grad_accum=2 --set parallel.ep=2"},
    {"pp2ep2", 4, "--set train.grad_accum=2 --set parallel.pp=2 --set parallel.ep=2"},
};

class LayoutMatrix : public HybridRuns {
 protected:
  static constexpr const char* kCommon =
      "--set train.steps=8 --set train.ckpt_every=4 --set train.eval_every=0 ";

  // Saves under every layout, resumes each checkpoint under every layout, and compares.
  void run_matrix(const std::vector<Layout>& layouts, const std::string& model) {
    const std::string base = kCommon + model;
    const std::string ref = run("ref", 1, base + "--set train.grad_accum=4");
    const auto ref_losses = losses(ref);
    ASSERT_EQ(ref_losses.size(), 8u);
    for (const Layout& s : layouts) {
      run("save-" + s.name, s.nproc, base + s.set + " --set run.stop_after=4");
    }
    int pairs = 0;
    double worst = 0;
    for (const Layout& s : layouts) {
      for (const Layout& l : layouts) {
        SCOPED_TRACE("saved as " + s.name + ", resumed as " + l.name);
        const std::string name = s.name + "-to-" + l.name;
        fs::copy(dir_ + "/save-" + s.name, dir_ + "/" + name, fs::copy_options::recursive);
        const std::string r = run(name, l.nproc, base + l.set);
        const auto x = losses(r);
        ASSERT_EQ(x.size(), 8u) << r;  // steps 1-4 of the save, 5-8 of the resume
        for (size_t i = 4; i < 8; ++i) {
          const double rel = std::abs(x[i] - ref_losses[i]) / ref_losses[i];
          worst = std::max(worst, rel);
          EXPECT_LE(rel, kLossTol) << "step " << i + 1 << ": " << x[i] << " vs " << ref_losses[i];
        }
        const auto val = series(r, "val_loss", "val_examples");
        const auto val_ref = series(ref, "val_loss", "val_examples");
        ASSERT_FALSE(val_ref.empty());
        ASSERT_EQ(val.size(), val_ref.size());  // the final evaluation (and the summary's copy)
        EXPECT_LE(std::abs(val.back() - val_ref.back()), kLossTol * val_ref.back());
        expect_weights_close(r, ref, kWeightTol, model.empty());
        ++pairs;
      }
    }
    std::printf("%d save x load pairs: max relative loss difference %.3g\n", pairs, worst);
    EXPECT_EQ(pairs, static_cast<int>(layouts.size() * layouts.size()));
  }
};

TEST_F(LayoutMatrix, EveryDenseLayoutResumesEveryOther) {
  run_matrix(kDense, "");
}

TEST_F(LayoutMatrix, EveryMoeLayoutResumesEveryOther) {
  run_matrix(kMoeLayouts, kMoe);
}

}  // namespace
}  // namespace brigade
