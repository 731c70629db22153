#pragma once
// The step engine: what differs between the two ways brigade trains, behind the one loop that
// drives both (training_loop.h). The data-parallel engine (dp_engine.h) runs a whole Model under
// a DpStrategy (DDP, ZeRO or a low-communication ReplicaSync); the model-parallel engine
// (model_parallel_engine.h) runs GPT pipeline chunks of tensor-parallel shards through the
// pipeline executor over a pp x dp x tp mesh. The loop owns everything they do alike: resume,
// the step loop with its metrics and log lines, the non-finite stop/skip decision, clipping's
// decision, evaluation records, the checkpoint cadence through the one TrainingCheckpointer,
// straggler detection and the run summary.
//
// One step, on every rank:
//   r = compute_gradients(step)      data, forward + backward, gradients agreed across replicas,
//                                    the step's mean loss and global gradient norm (collectives)
//   [loop: non-finite? stop or skip; clip scale]
//   scale_grads(scale)               only when clipping
//   apply_update(lr, updates)        the optimizer
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/data/loader.h"
#include "brigade/monitor/comm_by_axis.h"
#include "brigade/monitor/step_breakdown.h"
#include "brigade/parallel/dp_strategy.h"
#include "brigade/train/checkpointing.h"
#include "brigade/train/evaluate.h"

namespace brigade {

// What a step's gradient phase found; the same on every rank (agreed by collectives), except
// busy_s, this rank's own compute time.
struct StepGradients {
  double loss = 0;  // mean over the global batch
  double norm = 0;  // global L2 norm of the averaged gradient
  // Seconds this rank computed (forward + backward, before waiting for gradients from others):
  // the straggler detector's input.
  double busy_s = 0;
  // This rank's seconds in the gradient phase by part (monitor/step_breakdown.h): data, compute
  // (= busy_s), comm (waits for gradient and scalar collectives), bubble (pipeline idle).
  StepBreakdown times;
};

class TrainEngine {
 public:
  virtual ~TrainEngine() = default;

  // ---- Start ----
  // Log lines describing the layout, before the data summary and after it.
  virtual void log_layout() = 0;
  virtual void log_model() = 0;
  // Writes the initial parameters (every rank the same values, whatever the layout).
  virtual void initialize(uint64_t seed) = 0;
  // Global examples per step (micro-batch x micro-steps x replicas).
  virtual int64_t examples_per_step() const = 0;
  virtual DataLoader& loader() = 0;

  // ---- Steps ----
  virtual StepGradients compute_gradients(int64_t step) = 0;
  virtual void scale_grads(float scale) = 0;
  virtual void apply_update(float lr, int64_t updates) = 0;
  // The loop skipped this step's update (non-finite, train.on_nonfinite = "skip"); updates: the
  // count so far. Parameter servers still advance the step's clock.
  virtual void skip_update(int64_t /*updates*/) {}
  // Adds the engine's own keys to a step's metrics record (rank 0 writes it); may run
  // collectives that belong to the step. applied: the update was applied; updates: the count so
  // far; last: the run's final step; loop_traffic: what the loop itself moved on the world
  // communicator this step by formula (the straggler all-gather), for byte formulas.
  virtual void add_step_metrics(nlohmann::json& rec, bool applied, int64_t updates, bool last,
                                const Traffic& loop_traffic) = 0;
  // Whether the loop's per-step straggler exchange may run: false where replicas must not wait
  // for each other (DiLoCo with sync.quorum < 1 exchanges nothing between outer steps).
  virtual bool replicas_wait_each_step() const { return true; }

  // ---- Evaluation ----
  // Collective: the validation pass, summed over every rank.
  virtual EvalSums evaluate() = 0;

  // ---- Checkpoints ----
  // Right before the pieces are copied for a save: brings them up to date where they live
  // elsewhere (parameter servers own the parameters and optimizer state), as of `step`.
  virtual void prepare_checkpoint(int64_t /*step*/) {}
  // This rank's state as pieces of the checkpoint's global tensors (fixed list, no copies).
  virtual std::vector<StatePiece> checkpoint_pieces() = 0;
  // Stored in the manifest (the layout that wrote it).
  virtual nlohmann::json checkpoint_mesh() const = 0;
  // Extra keys of the saved state ("sync", "hybrid") next to step, sampler, config, provenance.
  virtual nlohmann::json checkpoint_extra() const = 0;
  // Refuses (throws) a checkpoint this engine cannot continue, before any tensor is read.
  virtual void check_resume(const SavedState& saved, const std::string& dir) const = 0;
  // The whole model's tp = 1 layout, in which checkpoints before format 3 stored flat state.
  virtual ParamLayout checkpoint_layout() const = 0;
  // Parameters of the whole model (every rank's shards together).
  int64_t num_params() const { return checkpoint_layout().total(); }
  // Collective, once before training; resumed: the pieces were read from a checkpoint.
  virtual void after_restore(bool resumed) = 0;
  // Before after_restore (or after_initial_weights): the step this invocation starts at.
  virtual void set_start_step(int64_t /*step*/) {}
  // After after_restore: the step a worker that joined a running job continues at (a
  // parameter-server worker restarted into an ssp/asp run); nullopt for every other start.
  virtual std::optional<int64_t> joined_step() const { return std::nullopt; }
  // The step the loop trains next, `candidate` being the one after the last (the start step
  // first): candidate itself, except where steps are handed out (parameter-server workers
  // under ps.assignment = "dynamic": the global step of this worker's next slice, which may
  // repeat or jump, and `end` once the invocation's slices are all taken).
  virtual int64_t next_step(int64_t candidate, int64_t /*end*/) const { return candidate; }
  virtual bool assigns_steps() const { return false; }
  // Collective, once before training, instead of after_restore: the parameters among the pieces
  // were read from another run (train.init_from); the rest of the state is fresh.
  virtual void after_initial_weights() { after_restore(false); }

  // ---- Reports ----
  virtual void add_provenance(nlohmann::json&) const {}
  // Every communicator this rank trains with, named after its group; empty for one process.
  virtual std::vector<CommChannel> comm_channels() = 0;
  virtual void add_summary(nlohmann::json& summary) = 0;
};

}  // namespace brigade
