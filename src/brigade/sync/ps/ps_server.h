#pragma once
// One parameter server (sync/ps/): it owns the contiguous range [begin, end) of the flat
// parameter buffer, its share of the optimizer state (train.optimizer, created for that range
// only: no worker holds optimizer state), and the clocks of the workers.
//
// Consistency models (docs/parameter-servers.md):
//   bsp  Every worker pushes clock c; when all have, the server averages them in worker order,
//        answers each with the squared norm of the mean on its range (the workers sum those over
//        servers into the global norm and agree on clipping and the non-finite decision, as DDP
//        does), then applies the update the workers send (lr, clip scale, or skip) with one
//        optimizer step and answers every worker with the new parameters. The arithmetic of
//        DDP-SGD of the same global batch.
//   ssp  Each push is applied on arrival, as one optimizer step with lr / N on that worker's
//        gradient (N such steps move SGD as far as one BSP step); a pull for clock c is answered
//        once every live worker has completed clock c - s (Ho et al., NIPS 2013), so no applied
//        gradient was computed on parameters more than s clocks old.
//   asp  As ssp without the wait.
// With aggregate = K > 1 (ssp, asp) the server sums pushes as they arrive and applies every K of
// them as one optimizer step on their mean with lr K / N (K-batch asynchronous SGD, Dutta et
// al., AISTATS 2018; TensorFlow's SyncReplicasOptimizer): the moments see K workers' gradients
// at once, as under bsp, while no worker waits for the others. A partial group is applied when
// no worker is training any more and before the state is read (a checkpoint holds every push
// received). With K = N and s = 0 the N pushes of a group are exactly one clock's: bsp's update
// for every optimizer.
// Staleness of an update = its clock minus the clock every worker had completed when its
// parameters were read; with ps.staleness_lr the step is further divided by max(1, staleness)
// (Zhang et al., IJCAI 2016). Every applied update's staleness is recorded and sent with each
// parameter reply, so the workers' metrics carry the server's record.
//
// A message that does not fit the server's state (a worker it does not know, a clock out of
// order, a payload of the wrong size, a step before init) is refused with a logged reason and
// changes nothing.
//
// Workers that fail (ssp, asp). A worker the server has heard nothing from for worker_timeout
// while it owes a message (it is not waiting for a reply) leaves the staleness bound: the
// completed clock is the lowest of the other workers', so they go on. Any message of its own
// brings it back (a stopped process continued). A restarted worker joins again (kJoin): the
// server answers with the clocks it has completed and the step the invocation started at, and
// the worker continues from there with the parameters it pulls (sync/ps/ps_worker.h). The
// server ends when worker 0 and every worker still in the bound have stopped.
//
// Dynamic assignment (ssp, asp; ps.assignment = "dynamic"). Workers take the slices of the
// global data order one at a time as they are ready (ps_worker.h), so a worker's clock is the
// global step of the slice it trains: it never decreases, and it may stay or jump. A pull
// declares it, a push carries the next one (next_clock), and "every live worker has completed
// clock c - s" means every slice still being trained is of step c - s or later, so the bound
// and the staleness keep their meaning, counted in global steps. A worker out of slices leaves
// the bound with its last push (kPsFlagNoNext); worker 0's last pull (kPsFlagDrain) is
// answered once every other worker is out, stopped or gone, with every slice applied.
//
// Checkpoints (ssp, asp): consistent cuts. The steps a checkpoint can be taken at are known in
// advance: the multiples of cut_every (train.ckpt_every) and, under static assignment, the
// invocation's last step. A pull for a clock at or past the next such step waits until every
// live worker has completed the clocks before it; the server then copies its state (the cut:
// every update of an earlier step applied, none of a later one, since no worker has read
// parameters for one) and answers the pulls. Worker 0's state request for a step names it and
// gets the cut of that step (flagged kPsFlagCut), else the state of the moment. A checkpoint
// thus costs the fast workers one wait for the slowest at each checkpoint step, like a bsp
// clock, and resuming from it trains every later slice exactly once.
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "brigade/comm/curve_socket.h"
#include "brigade/optim/optimizer.h"
#include "brigade/sync/ps/ps_message.h"

namespace brigade {

enum class PsConsistency { kBsp, kSsp, kAsp };
// "bsp", "ssp", "asp" (validated config values).
PsConsistency parse_ps_consistency(const std::string& name);

struct PsServerOptions {
  int index = 0;      // this server, 0..servers-1
  int workers = 1;    // N
  int64_t begin = 0;  // the flat range it owns
  int64_t end = 0;
  PsConsistency consistency = PsConsistency::kBsp;
  int64_t staleness = 0;  // ssp: s
  bool staleness_lr = false;
  uint64_t run_tag = 0;
  // A server that hears from no worker for this long gives up (CommError): every wait is
  // bounded. comm.timeout_s.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // ssp, asp: a silent worker leaves the bound after this long (ps.worker_timeout_s); 0: never.
  std::chrono::milliseconds worker_timeout{0};
  bool dynamic = false;  // ssp, asp: ps.assignment = "dynamic" (see the top of this file)
  int aggregate = 1;     // ssp, asp: pushes per applied update, K (see the top of this file)
  // ssp, asp: checkpoint steps (see the top of this file): train.ckpt_every (0: only the last
  // step) and the invocation's end (train.steps, run.stop_after) from the start step.
  int64_t cut_every = 0;
  int64_t steps = 0;
  int64_t stop_after = 0;
};

class ParameterServer {
 public:
  ParameterServer(const PsServerOptions& options, const ParamLayout& layout,
                  const OptimizerConfig& optimizer, std::function<void(const std::string&)> log);

  // Serves until done(). Throws CommError when no message arrives for options.timeout.
  // refresh_keys, when given, is called now and then to admit the keys of restarted workers.
  void serve(CurveServerSocket& socket, const std::function<void()>& refresh_keys = {});

  // What the server has applied (for its log and tests).
  const PsStalenessRecord& staleness() const { return staleness_; }
  int64_t refused() const { return refused_; }
  int64_t workers_left() const { return left_events_; }  // times a worker left the bound
  int64_t workers_joined() const { return rejoins_; }    // kJoin after the start
  int64_t state_values() const;  // parameters + optimizer state of the range

  // One message (exposed for tests that drive a server without sockets). Replies go to
  // reply(worker, frames).
  using Reply = std::function<void(int worker, zmq::multipart_t&&)>;
  void handle(int authenticated_worker, zmq::multipart_t&& frames, const Reply& reply);
  bool done() const;

 private:
  void refuse(int worker, const std::string& why);
  void on_init(const PsMessage& m, const Reply& reply);
  void on_push(const PsMessage& m, const Reply& reply);
  void on_apply(const PsMessage& m, const Reply& reply);
  void on_push_apply(const PsMessage& m, const Reply& reply);
  void on_pull(const PsMessage& m, const Reply& reply);
  void on_state_get(const PsMessage& m, const Reply& reply);
  void on_stop(const PsMessage& m, const Reply& reply);
  void on_join(const PsMessage& m, const Reply& reply);
  // again: the worker had joined before (a restarted one), flagged kPsFlagRejoin.
  void send_joined(int worker, const Reply& reply, bool again);
  // Workers silent for options.worker_timeout leave the bound (see the top of this file).
  void leave_silent(std::chrono::steady_clock::time_point now, const Reply& reply);
  // Clocks every live worker has completed.
  int64_t completed_clock() const;
  bool pull_ready(int64_t clock) const;
  // ssp/asp checkpoints: the first cut step after `step` (a global step), or -1.
  int64_t cut_after(int64_t step) const;
  // A global step in the server's clocks (static: counted from the invocation's start).
  int64_t clock_of(int64_t step) const { return options_.dynamic ? step : step - base_step_; }
  // The parameters, then each optimizer state buffer (kInit's and kState's layout).
  void copy_state(float* out) const;
  // Takes every cut the workers have reached (copies the state).
  void take_cuts();
  // Whether every worker but `worker` (-1: every worker) is out of slices, stopped or gone.
  bool others_finished(int worker) const;
  void answer_ready_pulls(const Reply& reply);
  // ssp/asp: one push applied, or (aggregate > 1) added to the open group.
  void apply_push(const PsMessage& m, int64_t staleness);
  // aggregate > 1: the open group's mean as one optimizer step; nothing when it is empty.
  void apply_group();
  void send_params(int worker, const Reply& reply);
  PsHeader reply_header(PsType type, int worker) const;

  PsServerOptions options_;
  int64_t n_;  // values in the range
  std::function<void(const std::string&)> log_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<StateView> state_;  // the optimizer's buffers over the range
  std::vector<float> params_;
  std::vector<float> mean_;                 // bsp: the clock's mean gradient
  std::vector<std::vector<float>> pushed_;  // bsp: each worker's gradient of the open clock
  std::vector<int64_t> clock_;              // per worker: clocks completed (pushed and applied)
  std::vector<float> group_sum_;            // aggregate > 1: the open group's gradient sum
  int64_t group_size_ = 0;                  // pushes in it
  float group_lr_ = 0;                      // the lr and update count of its newest push
  int64_t group_updates_ = -1;
  std::vector<char> pushed_open_;   // bsp: pushed the open clock
  std::vector<char> applied_open_;  // bsp: sent kApply for the open clock
  std::vector<char> stopped_;
  std::vector<int64_t> pending_pull_;  // per worker: the clock it waits for, or -1
  std::vector<char> left_;             // ssp/asp: silent too long, out of the bound
  std::vector<char> pending_join_;     // kJoin before init: answered by on_init
  std::vector<char> joined_;           // has sent kJoin (or is worker 0): the next one is a rejoin
  std::vector<char> out_;              // dynamic: pushed its last slice, out of the bound
  // Per worker: when it last sent a message or was last answered (from then it owes one).
  std::vector<std::chrono::steady_clock::time_point> last_heard_;
  int64_t base_step_ = 0;  // the step the invocation started at (kInit's updates)
  int64_t end_step_ = 0;   // the step it ends at
  int64_t next_cut_ = -1;  // ssp/asp: the next checkpoint step (global), -1: none left
  int64_t cut_step_ = -1;  // the step of the last cut taken, its state and its pushes
  std::vector<float> cut_state_;
  int64_t cut_applied_ = 0;
  int64_t left_events_ = 0;
  int64_t rejoins_ = 0;
  PsHeader apply_;  // bsp: the open clock's kApply (the first one)
  bool initialized_ = false;
  PsStalenessRecord staleness_;
  int64_t refused_ = 0;
};

}  // namespace brigade
