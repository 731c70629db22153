#pragma once
// A pipeline schedule is data: for each of the p pipeline ranks, the ordered list of actions it
// runs in one training step. One executor (executor.h) runs any of them, and the simulator
// (simulator.h) checks and times them without a model.
//
// Terms. The model is cut into S = p * v stages; rank r holds the v chunks (local model pieces)
// c = 0..v-1, chunk c being global stage s = c * p + r (Megatron's interleaved layout, so stage
// s + 1 lives on rank (r + 1) mod p). The global batch is cut into m micro-batches. Per
// (micro-batch, chunk) a rank runs
//   Forward         F: input activation in, output activation out (the last stage: the loss);
//   BackwardInput   B: output gradient in, input gradient out (on the critical path);
//   BackwardWeight  W: the weight gradients of that micro-batch (off the critical path);
//   Backward          B and W fused, as GPipe and 1F1B run them.
// Activations move forward (stage s to s + 1) and their gradients backward, point to point;
// each action records the receive it needs before it runs and the send it makes after.
//
// Schedules (p ranks, m micro-batches, v chunks per rank):
//   kGPipe        all F in micro-batch order, then all Backward (Huang et al. 2019). Holds m
//                 micro-batches of activations.
//   k1F1B         PipeDream-flush (Narayanan et al. 2021): rank r runs min(p - r - 1, m)
//                 warm-up forwards, then alternates one F and one Backward, then drains.
//                 Holds at most p - r micro-batches.
//   kInterleaved  Megatron's interleaved 1F1B (Narayanan et al. SC'21), v >= 1 chunks per
//                 rank, m a multiple of p. Forwards go through micro-batches in groups of p,
//                 chunk 0 then 1 ... then v - 1; backwards in the same groups with chunks
//                 reversed; warm-up (p - r - 1) * 2 + (v - 1) * p forwards (all of them when
//                 m == p), then 1F1B.
//   kZbH1         zero-bubble ZB-H1 (Qi et al. 2023): 1F1B with the backward split into B and
//                 W, W deferred to fill the bubbles. Rank r: min(p - r - 1, m) warm-up F, then
//                 r + 1 times (F, B), then (W, F, B) while forwards remain, then (W, B) while
//                 backwards remain, then the remaining W. At most p micro-batches in flight on
//                 any rank, the peak of 1F1B (rank 0).
#include <cstdint>
#include <string>
#include <vector>

namespace brigade {

enum class ScheduleKind { kGPipe, k1F1B, kInterleaved, kZbH1 };

// "gpipe", "1f1b", "interleaved", "zb-h1".
const char* schedule_kind_name(ScheduleKind kind);
// Throws ConfigError listing the names allowed.
ScheduleKind parse_schedule_kind(const std::string& name);

enum class ActionKind : uint8_t { kForward, kBackward, kBackwardInput, kBackwardWeight };
// "F", "BW" (fused), "B", "W".
const char* action_kind_name(ActionKind kind);

struct Action {
  ActionKind kind = ActionKind::kForward;
  int mb = 0;             // micro-batch, 0..m-1
  int chunk = 0;          // local chunk, 0..v-1 (global stage chunk * p + rank)
  int recv_from = -1;     // rank whose message this action needs first, -1 for none
  uint32_t recv_tag = 0;  // its tag
  int send_to = -1;       // rank this action's result goes to, -1 for none
  uint32_t send_tag = 0;  // its tag
};

struct PipelineShape {
  int ranks = 1;           // p: pipeline ranks
  int micro_batches = 1;   // m
  int virtual_stages = 1;  // v: chunks per rank (interleaved only; 1 otherwise)
  int stages() const { return ranks * virtual_stages; }
};

struct Schedule {
  ScheduleKind kind = ScheduleKind::k1F1B;
  PipelineShape shape;
  std::vector<std::vector<Action>> ranks;  // ranks[r]: rank r's actions in order

  int global_stage(int rank, int chunk) const { return chunk * shape.ranks + rank; }
  // Whether the schedule splits the backward into B and W.
  bool split_backward() const { return kind == ScheduleKind::kZbH1; }
};

// Throws ConfigError with the reason when kind cannot run on shape: a count below 1, v != 1 for
// a schedule without virtual stages, m not a multiple of p for interleaving, or (with
// n_layers > 0) more stages p * v than layers to put in them.
void validate_schedule(ScheduleKind kind, const PipelineShape& shape, int64_t n_layers = 0);

// Validates (as above, without a layer count) and builds the action lists.
Schedule build_schedule(ScheduleKind kind, const PipelineShape& shape);

// Tag of the message into global stage `stage` for micro-batch mb: activations (forward) and
// gradients (backward) get distinct tags, unique within one step.
uint32_t activation_tag(int stage, int mb, int micro_batches);
uint32_t gradient_tag(int stage, int mb, int micro_batches);

// Cost of one action on one chunk, in any time unit (the simulator's "unit costs" are 1, 1, 1:
// a fused Backward then costs 2, twice a forward, as in the papers' analyses).
struct ActionCosts {
  double forward = 1.0;
  double backward_input = 1.0;
  double backward_weight = 1.0;
};

// Idle fraction per rank (bubble time / step time) the schedule's analysis predicts, with every
// chunk costing `costs` and free communication:
//   GPipe, 1F1B   (p - 1) / (m + p - 1)
//   interleaved   (p - 1) / (v m + p - 1): the warm-up and drain are (p - 1) chunk-steps of 1/v
//                 of a stage each, i.e. Megatron's bubble (p - 1) / (v m) relative to the ideal
//                 step time, expressed as a fraction of the whole step
//   ZB-H1         (p - 1)(F + B - W) / (m (F + B + W) + (p - 1)(F + B - W)): the bubble of 1F1B
//                 shrinks from (p - 1)(F + B + W) to (p - 1)(F + B - W) (Qi et al., for
//                 W <= F, B); with unit costs (p - 1) / (3 m + p - 1), -> 0 as m grows.
double theoretical_bubble(ScheduleKind kind, const PipelineShape& shape,
                          const ActionCosts& costs = {});

// One line per rank ("rank 0: F0 F1 B0 ..." with ".c" for chunk c when v > 1), for errors and
// logs.
std::string describe_schedule(const Schedule& schedule);

}  // namespace brigade
