#pragma once
// A parameter-server worker as the DpStrategy (parallel/dp_strategy.h) the data-parallel engine
// drives: gradients stay on the worker until step(); parameters come from the servers, which
// own them and the optimizer (ps_server.h). One step:
//
//   bsp  finish_gradients()  push each server its range; wait for the squared norms of the
//                            mean gradient (the global norm is their sum, the same on every
//                            worker, so clipping and the non-finite decision are DDP's)
//        step(lr, t)         apply: lr, the clip scale, t; wait for the new parameters
//   ssp/asp
//        finish_gradients()  nothing: the norm is this worker's own (steps are independent)
//        step(lr, t)         push the (clipped) gradient, applied on arrival; pull the
//                            parameters for the next clock, which the servers answer once the
//                            staleness bound allows (asp: at once)
//
// Checkpoints. Worker 0 alone declares the pieces (every parameter whole and the optimizer state
// per tensor, the layout DDP saves, so a PS checkpoint resumes as DDP and the reverse); before
// a save, prepare_checkpoint() fetches them from the servers into the model's parameters and a
// staging optimizer's buffers, which otherwise sit idle. On start worker 0 sends the servers the
// initial or restored parameters and state; every worker then pulls clock 0. Under bsp a save
// sees exactly the state after the saved step (no clock applies until worker 0 pushes again);
// under ssp/asp the servers' cut of the saved step (ps_server.h, "Checkpoints"), or on a save
// between checkpoint steps their state of that moment (saved_state() says which).
//
// Joining. Workers 1..N-1 start by joining (kJoin): the servers answer, once worker 0 has
// initialised them, with the clocks this worker has completed and the step the invocation
// started at. On a first start that is clock 0; a worker restarted into a running ssp/asp job
// (brigade launch --max-restarts) continues at that clock with the latest parameters, and
// joined_step() says which step of the run that is.
//
// Dynamic assignment (ssp, asp; ps.assignment = "dynamic"). The invocation's data order is
// handed out one slice at a time: slice u is worker u mod N's part of global step u / N under
// static assignment (the same examples), and a worker that is ready takes the next one through
// an atomic counter in the job's store, so fast workers train more slices and a slow one fewer.
// A worker's clock is then its slice's step (the servers' bound counts global steps,
// ps_server.h); it takes its first slice after start or joining, and its next one before each
// push, which carries that slice's clock. Out of slices, a worker's last push says so; worker 0
// then waits until every other worker is out too (a drain), so that the parameters it
// evaluates and saves at the end hold every slice's update.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "brigade/comm/comm_stats.h"
#include "brigade/comm/curve_socket.h"
#include "brigade/comm/store.h"
#include "brigade/model/model.h"
#include "brigade/parallel/dp_strategy.h"
#include "brigade/sync/ps/ps_message.h"
#include "brigade/sync/ps/ps_server.h"

namespace brigade {

struct PsWorkerOptions {
  int worker = 0;   // this worker, 0..workers-1
  int workers = 1;  // N
  int servers = 1;  // S
  PsConsistency consistency = PsConsistency::kBsp;
  std::chrono::milliseconds timeout = std::chrono::seconds(60);  // every wait for a server
  bool dynamic = false;    // ssp, asp: ps.assignment = "dynamic"
  int64_t steps = 0;       // dynamic: train.steps and run.stop_after, which end the slices
  int64_t stop_after = 0;  // of an invocation
};

class PsWorker : public DpStrategy {
 public:
  // Rendezvous through store (ps_rendezvous.h) and connects to every server.
  PsWorker(Model& model, const OptimizerConfig& optimizer, const PsWorkerOptions& options,
           Store& store);
  // Tells the servers this worker is done.
  ~PsWorker() override;

  int zero_stage() const override { return 0; }
  Optimizer& optimizer() override;
  void start_step() override { model_.zero_grads(); }
  void before_backward(bool) override {}
  double finish_gradients() override;
  double grad_sum_squares() override { return sum_squares_; }
  void scale_grads(float scale) override;
  void step(float lr, int64_t step) override;
  // A skipped update (non-finite under train.on_nonfinite = "skip"): the clock still advances.
  void skip_step(int64_t updates);
  // Worker 0: fetches the servers' parameters and optimizer state of `step` for the pieces below
  // (ssp/asp: the servers' cut of that step, ps_server.h).
  void prepare_checkpoint(int64_t step);
  struct SavedState {
    bool cut = true;              // a consistent cut of the step (every server said so)
    int64_t updates_applied = 0;  // server 0's: pushes (bsp: clocks)
  };
  const SavedState& saved_state() const { return saved_; }
  std::vector<StatePiece> checkpoint_pieces() override;
  void after_restore(bool resumed) override;
  // Before after_restore: the step this invocation starts at (worker 0 tells the servers).
  void set_start_step(int64_t step) { start_step_ = step; }
  // After after_restore, a worker restarted into the running job (the servers said it had
  // joined before): the run's step at its clock (dynamic: of its first slice); else nullopt.
  std::optional<int64_t> joined_step() const { return joined_step_; }
  // Dynamic: the global step of the slice this worker trains next, and which worker's part of
  // that step it is (data slice); nullopt once the invocation's slices are handed out.
  struct Slice {
    int64_t step = 0;
    int64_t part = 0;
  };
  std::optional<Slice> slice() const;
  int64_t slices_trained() const { return slices_trained_; }
  bool dynamic() const { return options_.dynamic; }

  // Whether workers step without waiting for each other (ssp, asp).
  bool independent_steps() const { return options_.consistency != PsConsistency::kBsp; }
  CommStats& stats() { return stats_; }
  // The servers' staleness record as of the last parameter reply (server 0's; every server
  // applies the same updates).
  const PsStalenessRecord& staleness() const { return staleness_; }

 private:
  PsHeader header(PsType type) const;
  // Waits for server k's next message, which must be of type `type` (CommError otherwise).
  PsMessage receive(int k, PsType type);
  void send(int k, const PsHeader& h, const float* payload);
  void pull_params();  // kParams from every server into the model's parameters
  void push_apply(float lr, int64_t updates, bool skip);
  void apply(float lr, int64_t updates, bool skip);
  // Dynamic: takes the next slice of the invocation (slice_ = -1 when there is none left).
  void take_slice();
  // Dynamic, after after_restore: sends this worker's first pull, or (out of slices at once)
  // its stop of the bound; worker 0 out of slices drains.
  void pull_first();
  // Dynamic, worker 0 out of slices: the parameters once every other worker is out too.
  void drain();

  Model& model_;
  PsWorkerOptions options_;
  Store& store_;
  CurveKeyPair keys_;
  uint64_t run_tag_ = 0;
  std::string slices_key_;  // dynamic: the store's counter of the job's slices
  std::vector<std::pair<int64_t, int64_t>> ranges_;
  std::vector<std::unique_ptr<CurveClientLink>> links_;
  std::unique_ptr<Optimizer> staging_;  // worker 0: the servers' state, copied for checkpoints
  CommStats stats_;
  int64_t clock_ = 0;       // this invocation's steps taken (applied or skipped)
  int64_t read_clock_ = 0;  // ssp/asp: the clock the current parameters were read at
  int64_t start_step_ = 0;
  std::optional<int64_t> joined_step_;
  int64_t base_step_ = 0;       // the step the invocation started at
  int64_t slice_ = -1;          // dynamic: the slice being trained, -1 when none is left
  int64_t slices_trained_ = 0;  // dynamic: pushed by this worker
  double sum_squares_ = 0;
  float scale_ = 1.0f;
  PsStalenessRecord staleness_;
  SavedState saved_;
};

}  // namespace brigade
