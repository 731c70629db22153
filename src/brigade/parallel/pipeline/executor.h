#pragma once
// The one pipeline executor: runs this rank's action list of any Schedule against its
// PipelineStage chunks, moving activations and their gradients with point-to-point messages.
//
// Buffers. Each (micro-batch, chunk) gets a slot from forward until its weight gradient: the
// received input activation, the stage's saved buffer, the output activation being sent, and the
// receive buffer for the output's gradient. Buffers come from a pool (buffer_pool.h), so after
// the first step the loop does not allocate, and the pool's peak is the activation memory.
//
// Communication overlaps compute and cannot deadlock a deadlock-free schedule (simulator.h)
// because no send is waited for before the receiver must have posted it:
//   * the next forward's input receive is posted one action ahead;
//   * the gradient receive for a slot is posted right after its forward, long before the next
//     stage computes that gradient, so gradient sends complete without waiting for the peer;
//   * an activation send is waited for only at its slot's backward: the gradient that backward
//     needs exists only once the next stage has received the activation.
//
// Recomputation (per chunk): forward keeps only the slot's input; backward first re-runs the
// forward into a fresh saved buffer, so saved memory lives only from backward to weight gradient.
#include <memory>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/model/pipeline_stage.h"
#include "brigade/parallel/pipeline/buffer_pool.h"
#include "brigade/parallel/pipeline/schedule.h"

namespace brigade {

struct ExecutorOptions {
  std::vector<bool> recompute;  // per local chunk; empty: keep every activation
};

struct StepStats {
  float loss = 0.0f;           // sum of the micro-batches' losses on the rank of the last stage
  double wall_s = 0.0;         // the step on this rank, first action to last send completed
  double busy_s = 0.0;         // inside the stage's forward / backward calls (recompute included)
  double recompute_s = 0.0;    // of which re-running forwards
  double forward_s = 0.0;      // of which forwards (not recomputed ones)
  double input_grad_s = 0.0;   // of which backward_input
  double weight_grad_s = 0.0;  // of which backward_weight
  int peak_slots = 0;          // most (micro-batch, chunk) slots alive at once
  int64_t peak_bytes = 0;      // most bytes of slot and gradient buffers alive at once

  double idle_s() const { return wall_s - busy_s; }
  double bubble() const { return wall_s > 0 ? idle_s() / wall_s : 0.0; }
};

class PipelineExecutor {
 public:
  // comm: the pipeline group (size p, rank = pipeline rank), stays valid for the executor's
  // life. chunks[c]: this rank's stage for local chunk c (v of them), not owned; neighbouring
  // stages' input/output sizes must agree (checked when messages are posted only by size).
  PipelineExecutor(Communicator& comm, const Schedule& schedule, std::vector<PipelineStage*> chunks,
                   ExecutorOptions options = {});
  ~PipelineExecutor();

  // Runs one step: every action of this rank's list in order. Throws CommError if a peer fails.
  StepStats run_step();

 private:
  struct Slot;
  void post_input_recv(size_t index);
  void forward(const Action& a, StepStats& stats);
  void backward_input(const Action& a, StepStats& stats, bool send_now);
  void send_input_gradient(const Action& a);  // sends what the last backward_input computed
  void backward_weight(const Action& a, StepStats& stats);
  void drain_gradient_sends();
  Slot& slot(const Action& a);

  Communicator& comm_;
  Schedule schedule_;
  std::vector<PipelineStage*> chunks_;
  ExecutorOptions options_;
  int rank_;
  std::vector<Slot> slots_;                  // (mb, chunk) -> slot
  std::vector<std::vector<float>> scratch_;  // per chunk: recompute's throwaway output/saved
  std::vector<std::pair<std::unique_ptr<Work>, float*>> gradient_sends_;  // in flight
  float* pending_dinput_ = nullptr;  // computed by backward_input, not yet sent
  BufferPool pool_;
  int live_slots_ = 0;
};

}  // namespace brigade
