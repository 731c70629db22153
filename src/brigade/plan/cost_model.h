#pragma once
// What a layout costs on a cluster, predicted without running it (docs/planning.md): memory per
// rank by category and the step time by part, for a GPT config and its job plan. Built from the
// pieces training itself uses: the GPT's parameter layout cut into the plan's stages and tp
// shards (model/gpt_layout.h), the pipeline schedule run on paper by the simulator
// (parallel/pipeline/simulator.h) with the predicted per-micro-batch costs, the collectives'
// byte and round formulas (comm/wire_traffic.h, sync/lowcomm/common.h) over the cluster's links,
// and the ZeRO sharding of the engines.
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/model/gpt_layout.h"
#include "brigade/plan/cluster.h"
#include "brigade/runtime/config.h"
#include "brigade/train/job_plan.h"

namespace brigade {

// Bytes on the rank that needs the most.
struct MemoryPrediction {
  double weights = 0;      // f32 parameters held (ZeRO-3: the own shard and the gathered groups)
  double gradients = 0;    // f32 gradients held
  double optimizer = 0;    // optimizer state (AdamW m, v; SGD momentum), and a method's outer state
  double activations = 0;  // what forward keeps for backward, over the micro-batches in flight
  double buffers = 0;      // the working set of one micro-batch, gradient buckets, messages
  double overhead = 0;     // the process before its model (cluster.process_overhead_mib)

  double total() const {
    return weights + gradients + optimizer + activations + buffers + overhead;
  }
};

// Seconds of one optimizer step on the slowest rank, by part; step = the sum.
struct TimePrediction {
  double compute = 0;     // forward and backward of this rank's micro-batches (busy time)
  double tp_comm = 0;     // tensor-parallel all-reduces inside forward and backward
  double bubble = 0;      // pipeline idle time (and activation transfers between stages)
  double dp_exposed = 0;  // the replicas' exchange not hidden behind backward
  double optimizer = 0;   // the update of this rank's parameters
  double step = 0;
};

// The work of one micro-batch through a rank's chunks, by kind, as the cost model times it.
struct ChunkWork {
  // FLOPs of each GEMM call of forward; backward makes two calls of the same FLOPs for each
  // (the input's gradient in B, the weight's in W).
  std::vector<double> gemm_calls;
  double attention_flops = 0;  // forward; backward (in B) twice as many
  double elementwise_fwd = 0;  // bytes streamed by the other kernels of forward (layer norms,
  double elementwise_bwd = 0;  // GELU, residuals, embedding, softmax) and of backward
};

// One micro-batch of B sequences through `blocks` blocks of a GPT's tp shard (with the
// embedding on a first stage and ln_f, the head and the loss on a last one); local_experts:
// the experts of each MoE block on this ep rank.
ChunkWork chunk_work(const GptConfig& model, const GptShard& shard, int64_t B, int blocks,
                     int moe_blocks, bool first, bool last, int64_t local_experts);

// Floats that parts of the model hold (GPT): checked against the real stages in tests.
struct StageFootprint {
  int64_t params = 0;         // this rank's chunks' parameters (its tp shard, its experts)
  int64_t saved_floats = 0;   // per micro-batch, summed over its chunks: forward -> backward
  int64_t blocks = 0;         // blocks held
  int first_chunks = 0;       // chunks with the embedding (0 or 1)
  int last_chunks = 0;        // chunks with the head (0 or 1)
  int64_t largest_group = 0;  // ZeRO-3: the largest parameter group (a block, the embeddings)
  ChunkWork work;             // summed over its chunks
};

struct Prediction {
  MemoryPrediction memory;
  TimePrediction time;
  StageFootprint footprint;  // of the pipeline rank with the most parameters
  double tokens_per_step = 0;
  double tokens_per_s = 0;
  double mfu = 0;               // model FLOPs per step / (step x world x device peak x share)
  double joules_per_token = 0;  // devices busy x watts x step / tokens
  double dp_bytes = 0;          // per rank and step, sent on the dp (replica) axis
  double tp_bytes = 0;          // sent on the tp axis
  double pp_bytes = 0;          // sent to the next or previous stage
  bool dp_crosses_nodes = false;
  bool tp_crosses_nodes = false;
  bool pp_crosses_nodes = false;
};

// The footprint of pipeline rank `pp_rank` (its chunks) of a GPT config under the plan's mesh
// and stage cut. ConfigError for a model that is not a GPT.
StageFootprint stage_footprint(const Config& config, const JobPlan& plan, int pp_rank);

// Predicts config (validated) as the plan lays it out on the cluster; ConfigError for a model
// kind the planner does not cover (only GPT), or a world that is not the cluster's.
Prediction predict(const Config& config, const JobPlan& plan, const ClusterSpec& cluster);

}  // namespace brigade
