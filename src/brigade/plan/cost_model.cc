// The cost model behind `brigade plan`. A micro-batch through a chunk is timed by kind of work
// (chunk_work): each GEMM call of forward costs gemm_call_us + FLOPs / gemm_flops, and backward
// makes two such calls per forward call (the input's gradient in B, the weight's in W);
// attention runs at attention_flops (4 T C/tp per token and block forward, twice that in B);
// the other kernels stream their bytes at elementwise_gbs, every tp rank repeating them.
// Calibration measures each rate at the model's own shapes (plan/calibrate.h). The
// tensor-parallel all-reduces (two per block each way, of the micro-batch's activations, and
// the embedding's and the head's) are added to forward and backward; the pipeline runs on
// paper (the schedule simulator), each transfer between stages costing its bytes over the link
// plus one round trip. Processes that share a device stretch the step to their busy time over
// the devices. The replicas' gradient average costs its buckets' rings over the dp axis' link,
// of which the last micro-batch's backward hides what the device lets it
// (parallel.overlap_grad_reduce, comm_overlap); ZeRO adds its gathers; DiLoCo pays its average
// once per H steps. The update streams about 28 bytes per parameter it owns (AdamW reads
// parameters, gradients and two moments, writes three) through the device's memory bandwidth.
// Recomputation (train.recompute = "block") adds a forward to every backward.
#include "brigade/plan/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "brigade/base/error.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/parallel/pipeline/schedule.h"
#include "brigade/parallel/pipeline/simulator.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/train/model_factory.h"
#include "brigade/train/model_flops.h"
#include "brigade/train/sync_strategy.h"

namespace brigade {

namespace {

// "h.12.attn.c_attn.weight" -> 12; -1 for the embeddings and ln_f.
int block_of(const std::string& name) {
  if (name.rfind("h.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 2);
}

// "h.1.mlp.experts.3.c_fc.weight" -> 3; -1 outside the experts.
int expert_of(const std::string& name) {
  const size_t at = name.find(".experts.");
  return at == std::string::npos ? -1 : std::atoi(name.c_str() + at + 9);
}

// Floats GptStage keeps per micro-batch for one chunk (model/gpt_stage.cc: its saved buffer).
int64_t chunk_saved_floats(const GptConfig& m, const GptShard& sh, int64_t B, int tp, bool sp,
                           int blocks, bool first, bool last, bool split_backward) {
  const int64_t T = m.seq_len, BT = B * T, C = m.d_model;
  const int64_t rows = sp ? BT / tp : BT;
  int64_t block = 2 * rows + BT * C + 3 * BT * sh.c_local + BT * sh.c_local +
                  B * sh.heads_local * T + rows * C + 2 * rows + BT * C + 2 * BT * sh.fc_local +
                  rows * C;
  if (m.recompute_blocks) block = rows * C;
  if (split_backward && rows * C != BT * C) block += 2 * BT * C;
  int64_t n = block * blocks;
  if (first) n += rows * C;
  if (last) n += 2 * rows + BT * C + BT * sh.vocab_local + BT;
  return n;
}

// The link a mesh axis runs over: the ranks of one axis group are `stride` apart (tp fastest,
// then ep, dp, pp), so a group of `size` spans stride x size consecutive ranks.
const LinkSpec& axis_link(const ClusterSpec& c, int64_t stride, int64_t size, bool* crosses) {
  *crosses = size > 1 && (c.nodes > 1) && stride * size > c.processes_per_node;
  return *crosses ? c.cluster_link : c.node_link;
}

double seconds_over(const Traffic& t, const LinkSpec& link) {
  return static_cast<double>(std::max(t.sent, t.received)) / link.bytes_per_s() +
         static_cast<double>(t.rounds) * link.rtt_s();
}

int64_t optimizer_floats_per_param(const Config& config) {
  if (config.train.optimizer == "adamw") return 2;
  return config.train.momentum > 0 ? 1 : 0;
}

}  // namespace

ChunkWork chunk_work(const GptConfig& m, const GptShard& sh, int64_t B, int blocks, int moe_blocks,
                     bool first, bool last, int64_t local_experts) {
  const double BT = static_cast<double>(B * m.seq_len), T = static_cast<double>(m.seq_len);
  const double C = static_cast<double>(m.d_model), Cl = static_cast<double>(sh.c_local);
  const double Fl = static_cast<double>(sh.fc_local), Vl = static_cast<double>(sh.vocab_local);
  ChunkWork w;
  for (int b = 0; b < blocks; ++b) {
    w.gemm_calls.push_back(2 * BT * C * 3 * Cl);  // c_attn: this rank's heads' q, k, v
    w.gemm_calls.push_back(2 * BT * Cl * C);      // attn.c_proj
    if (b < blocks - moe_blocks) {
      w.gemm_calls.push_back(2 * BT * C * Fl);  // mlp.c_fc
      w.gemm_calls.push_back(2 * BT * Fl * C);  // mlp.c_proj
    } else {
      // The router, then each local expert on its share of the ep group's routed tokens
      // (top_k of every token, over all experts: BT top_k rows on this rank in all).
      w.gemm_calls.push_back(2 * BT * C * static_cast<double>(m.n_experts));
      const double rows =
          BT * static_cast<double>(m.moe_top_k) / static_cast<double>(local_experts);
      for (int64_t e = 0; e < local_experts; ++e) {
        w.gemm_calls.push_back(2 * rows * C * 4 * C);
        w.gemm_calls.push_back(2 * rows * 4 * C * C);
      }
    }
  }
  w.attention_flops = 4 * BT * T * Cl * blocks;
  // Bytes per token of the other kernels: per block two layer norms, GELU over 4C, two
  // residual adds (forward about 18 C floats read or written, backward twice that); the
  // embedding's lookup and sum; ln_f, the softmax and the loss over this rank's vocabulary.
  w.elementwise_fwd =
      4 * BT * (18 * C * blocks + (first ? 3 * C : 0) + (last ? 4 * C + 3 * Vl : 0));
  w.elementwise_bwd =
      4 * BT * (36 * C * blocks + (first ? 3 * C : 0) + (last ? 8 * C + 2 * Vl : 0));
  if (last) w.gemm_calls.push_back(2 * BT * C * Vl);  // the head
  return w;
}

namespace {

// The parameters of the GPT's tp shard by where they live: each block's (with one ep rank's
// experts), the embeddings, ln_f; counted once per prediction from the layout.
struct ParamCounts {
  std::vector<int64_t> block;
  int64_t wte = 0, wpe = 0, lnf = 0;
  int64_t largest_group = 0;
};

ParamCounts count_params(const GptConfig& gpt, const GptShard& shard, int64_t ep) {
  ParamLayout full;
  std::vector<ParamGroup> groups;
  build_gpt_layout(gpt, shard, full, groups);
  const int64_t local_experts = gpt.n_experts > 0 ? gpt.n_experts / ep : 0;
  ParamCounts n;
  n.block.assign(static_cast<size_t>(gpt.n_layer), 0);
  for (const ParamGroup& g : groups) n.largest_group = std::max(n.largest_group, g.end - g.begin);
  for (const ParamSpec& spec : full.specs()) {
    if (expert_of(spec.name) >= local_experts) continue;  // another ep rank's expert
    const int b = block_of(spec.name);
    if (b >= 0) {
      n.block[static_cast<size_t>(b)] += spec.numel;
    } else if (spec.name == "wte.weight") {
      n.wte += spec.numel;
    } else if (spec.name == "wpe.weight") {
      n.wpe += spec.numel;
    } else {
      n.lnf += spec.numel;
    }
  }
  return n;
}

GptConfig planned_gpt(const Config& config) {
  if (config.model.kind != ModelKind::kGpt) {
    throw ConfigError(
        fmt::format("model.kind = \"{}\": brigade plan predicts GPT models", config.model.kind));
  }
  GptConfig gpt = gpt_config(config.model);
  gpt.recompute_blocks = config.train.recompute == RecomputeMode::kBlock;
  return gpt;
}

StageFootprint footprint_of(const Config& config, const JobPlan& plan, const GptConfig& gpt,
                            const GptShard& shard, const ParamCounts& n, int pp_rank) {
  const MeshShape& s = plan.mesh.shape;
  const int L = static_cast<int>(gpt.n_layer);
  const std::vector<int> bounds =
      plan.model_parallel ? plan.mesh.stage_bounds : std::vector<int>{0, L};
  const int v = plan.model_parallel ? plan.mesh.virtual_stages : 1;
  const int pp = plan.model_parallel ? s.pp : 1;
  const int64_t local_experts = gpt.n_experts > 0 ? gpt.n_experts / s.ep : 0;
  StageFootprint f;
  f.largest_group = n.largest_group;
  for (int c = 0; c < v; ++c) {
    const int stage = c * pp + pp_rank;
    const int first = bounds[static_cast<size_t>(stage)];
    const int end = bounds[static_cast<size_t>(stage) + 1];
    const bool is_first = first == 0, is_last = end == L;
    // The embeddings on the first stage; ln_f and the head's wte on the last (one tensor when
    // the stage is both).
    if (is_first) f.params += n.wte + n.wpe;
    if (is_last) f.params += n.lnf + (is_first ? 0 : n.wte);
    int moe_blocks = 0;
    for (int l = first; l < end; ++l) {
      f.params += n.block[static_cast<size_t>(l)];
      moe_blocks += gpt.moe_block(l) ? 1 : 0;
    }
    const ChunkWork w = chunk_work(gpt, shard, config.train.micro_batch, end - first, moe_blocks,
                                   is_first, is_last, local_experts);
    f.work.gemm_calls.insert(f.work.gemm_calls.end(), w.gemm_calls.begin(), w.gemm_calls.end());
    f.work.attention_flops += w.attention_flops;
    f.work.elementwise_fwd += w.elementwise_fwd;
    f.work.elementwise_bwd += w.elementwise_bwd;
    f.blocks += end - first;
    f.first_chunks += is_first ? 1 : 0;
    f.last_chunks += is_last ? 1 : 0;
    f.saved_floats += chunk_saved_floats(gpt, shard, config.train.micro_batch, s.tp,
                                         plan.mesh.sequence_parallel, end - first, is_first,
                                         is_last, plan.model_parallel && !gpt.recompute_blocks);
  }
  return f;
}

}  // namespace

StageFootprint stage_footprint(const Config& config, const JobPlan& plan, int pp_rank) {
  const GptConfig gpt = planned_gpt(config);
  const GptShard shard = make_gpt_shard(gpt, plan.mesh.shape.tp, 0);
  return footprint_of(config, plan, gpt, shard, count_params(gpt, shard, plan.mesh.shape.ep),
                      pp_rank);
}

Prediction predict(const Config& config, const JobPlan& plan, const ClusterSpec& cluster) {
  if (plan.world != cluster.world()) {
    throw ConfigError(
        fmt::format("the plan has {} processes; the cluster runs {} (nodes x "
                    "processes_per_node)",
                    plan.world, cluster.world()));
  }
  const MeshShape& s = plan.mesh.shape;
  const int pp = plan.model_parallel ? s.pp : 1;
  Prediction out;
  // Memory is sized for the pipeline rank holding the most parameters; the costs are the
  // slowest rank's (the pipeline runs at its pace).
  StageFootprint worst, slowest;
  const GptConfig planned = planned_gpt(config);
  const GptShard shard = make_gpt_shard(planned, s.tp, 0);
  const ParamCounts counts = count_params(planned, shard, s.ep);
  for (int r = 0; r < pp; ++r) {
    const StageFootprint f = footprint_of(config, plan, planned, shard, counts, r);
    if (f.params > worst.params) worst = f;
    if (f.work.attention_flops + f.work.elementwise_fwd +
            static_cast<double>(f.work.gemm_calls.size()) >
        slowest.work.attention_flops + slowest.work.elementwise_fwd +
            static_cast<double>(slowest.work.gemm_calls.size()))
      slowest = f;
  }
  out.footprint = worst;

  const int64_t B = config.train.micro_batch, T = planned.seq_len, C = planned.d_model;
  const int64_t m = config.train.grad_accum;
  const int64_t replicas = static_cast<int64_t>(s.dp) * s.ep;
  const int v = plan.model_parallel ? plan.mesh.virtual_stages : 1;
  const bool bf16 = config.train.precision == "bf16";
  const DeviceSpec& dev = cluster.device;
  const double gemm_rate = bf16 ? dev.gemm_flops_bf16 : dev.gemm_flops;
  if (gemm_rate <= 0) {
    throw ConfigError(
        "train.precision = \"bf16\": the cluster's device has no bf16 GEMMs "
        "(device.gemm_flops_bf16)");
  }

  // Links of the mesh axes (tp fastest).
  const LinkSpec& tp_link = axis_link(cluster, 1, s.tp, &out.tp_crosses_nodes);
  const LinkSpec& dp_link =
      axis_link(cluster, static_cast<int64_t>(s.tp) * s.ep, s.dp, &out.dp_crosses_nodes);
  const LinkSpec& pp_link =
      axis_link(cluster, static_cast<int64_t>(s.tp) * s.ep * s.dp, pp, &out.pp_crosses_nodes);

  // Seconds per micro-batch and chunk on a device of its own (the rank's work over its chunks).
  const double BT = static_cast<double>(B * T);
  const double per_chunk = 1.0 / v;
  const ChunkWork& work = slowest.work;
  double gemm_s = 0;
  for (double f : work.gemm_calls) gemm_s += dev.gemm_call_us * 1e-6 + f / gemm_rate;
  gemm_s *= per_chunk;
  const double attention_s = work.attention_flops / dev.attention_flops * per_chunk;
  double f_s =
      gemm_s + attention_s + work.elementwise_fwd / (dev.elementwise_gbs * 1e9) * per_chunk;
  double b_s =
      gemm_s + 2 * attention_s + work.elementwise_bwd / (dev.elementwise_gbs * 1e9) * per_chunk;
  double w_s = gemm_s;
  // Tensor parallelism: two all-reduces of the micro-batch's (BT, C) activations per block in
  // forward, two in backward (sequence parallelism moves the same bytes as gathers and
  // scatters), and the embedding's sum (forward) and the head's input gradient (backward).
  double tp_fwd = 0, tp_bwd = 0;
  if (s.tp > 1) {
    const Traffic t = all_reduce_f32_traffic(B * T * C, s.tp, 0);
    const double each = seconds_over(t, tp_link);
    const double blocks = static_cast<double>(slowest.blocks) * per_chunk;
    tp_fwd = each * (2 * blocks + static_cast<double>(slowest.first_chunks) * per_chunk);
    tp_bwd = each * (2 * blocks + static_cast<double>(slowest.last_chunks) * per_chunk);
    out.tp_bytes = 4 * static_cast<double>(t.sent) * blocks * v * static_cast<double>(m);
  }
  // Recomputation runs each block's forward again inside backward.
  if (config.train.recompute == RecomputeMode::kBlock) b_s += f_s + tp_fwd;
  f_s += tp_fwd;
  b_s += tp_bwd;
  // The step's tensor-parallel all-reduces on this rank.
  const double tp_s = static_cast<double>(m) * v * (tp_fwd + tp_bwd);

  // The pipeline on paper: the makespan of the schedule's actions with these costs.
  const double busy = static_cast<double>(m) * v * (f_s + b_s + w_s);
  double makespan = busy;
  double pipeline_busy = busy * pp;  // every pipeline rank's busy seconds together
  if (plan.model_parallel && pp > 1) {
    const double activation_bytes = 4.0 * static_cast<double>(B * T * C);
    const double hop = activation_bytes / pp_link.bytes_per_s() + pp_link.rtt_s();
    const Schedule schedule =
        build_schedule(plan.mesh.schedule,
                       {.ranks = pp, .micro_batches = static_cast<int>(m), .virtual_stages = v});
    const SimulationResult sim = simulate(
        schedule, {.costs = {.forward = f_s, .backward_input = b_s, .backward_weight = w_s},
                   .comm_latency = hop});
    makespan = sim.makespan;
    pipeline_busy = 0;
    for (double b : sim.busy) pipeline_busy += b;
    out.pp_bytes = 2 * activation_bytes * static_cast<double>(m) * v;
    const int peak = *std::max_element(sim.peak_in_flight.begin(), sim.peak_in_flight.end());
    out.memory.activations = 4.0 * static_cast<double>(worst.saved_floats) / v * peak;
  } else {
    out.memory.activations = 4.0 * static_cast<double>(worst.saved_floats);
  }
  // More processes than devices on a node share them by time: the node cannot finish before
  // its processes' busy seconds over its devices (a rank idle in the pipeline's bubble frees its
  // device for another).
  // (The tensor-parallel all-reduces wait more than they compute: their time is not counted.)
  const double node_busy =
      (pipeline_busy / pp - tp_s) * static_cast<double>(cluster.processes_per_node);
  const double shared =
      node_busy / static_cast<double>(cluster.devices_per_node) /
      (cluster.processes_per_node > cluster.devices_per_node ? cluster.sharing_efficiency : 1.0);
  const double stretch = std::max(1.0, shared / makespan);
  makespan *= stretch;
  out.time.tp_comm = tp_s * stretch;
  out.time.compute = busy * stretch - out.time.tp_comm;
  out.time.bubble = makespan - busy * stretch;

  // The replicas' exchange of this rank's gradients (or DiLoCo's pseudo-gradients, once per H).
  const double P = static_cast<double>(worst.params);
  const int zero = s.dp > 1 ? static_cast<int>(config.parallel.zero) : 0;
  if (replicas > 1) {
    // DDP all-reduces its buckets (parallel.bucket_mb), each a ring of its own; ZeRO-1 adds the
    // all-gather of the updated parameters; ZeRO-2 reduce-scatters the buckets in every
    // micro-step instead; ZeRO-3 also gathers each layer group for forward and again for
    // backward in every micro-step (data-parallel engine). Low-communication methods other
    // than DiLoCo are predicted as DDP.
    const int64_t bucket = std::max<int64_t>(1, gradient_bucket_floats(config.parallel));
    const int64_t full_buckets = worst.params / bucket, tail = worst.params % bucket;
    const Traffic gather = all_gather_equal_traffic(worst.params * 4 / s.dp, s.dp, 0);
    double grads_s = 0, gathers_s = 0, bytes = 0;
    const auto add = [&](const Traffic& t, double times, double* seconds) {
      *seconds += seconds_over(t, dp_link) * times;
      bytes += static_cast<double>(t.sent) * times;
    };
    const double md = static_cast<double>(m);
    // Every full bucket and the last, shorter one: each its own ring.
    for (const auto& [floats, count] :
         {std::pair{bucket, full_buckets}, std::pair{tail, int64_t{1}}}) {
      if (floats == 0 || count == 0) continue;
      const Traffic one = all_reduce_traffic(floats, WireDtype::kF32, s.dp, 0);
      const double times = static_cast<double>(count);
      if (zero <= 1) add(one, times, &grads_s);
      if (zero >= 2) {
        add(Traffic{one.sent / 2, one.received / 2, one.rounds / 2}, times * md, &grads_s);
      }
    }
    if (zero >= 1) add(gather, 1, &gathers_s);
    if (zero == 3 && !plan.model_parallel) {
      const int64_t groups = std::max<int64_t>(1, planned.n_layer + 2);
      const Traffic group = all_gather_equal_traffic(worst.params * 4 / s.dp / groups, s.dp, 0);
      add(group, 2.0 * md * static_cast<double>(groups), &gathers_s);
    }
    if (config.sync.method == SyncKind::kDiloco) {
      const double H = static_cast<double>(config.sync.inner_steps);
      bytes /= H;
      out.time.dp_exposed = (grads_s + gathers_s) / H;  // an outer step waits for its average
    } else {
      // The gradient average runs under the last micro-batch's backward (DDP, ZeRO-1) as far as
      // the device lets it (comm_overlap); the parameter gathers come after the update.
      const bool overlapped = config.parallel.overlap_grad_reduce && zero < 2;
      const double window = overlapped ? (b_s + w_s) * dev.comm_overlap : 0.0;
      out.time.dp_exposed = std::max(0.0, grads_s - window) + gathers_s;
    }
    out.time.dp_exposed *= stretch;  // a ring's rounds wait for peers that share a device
    out.dp_bytes = bytes;
  }

  // Memory: f32 parameters, gradients and optimizer state as the engines hold them.
  const double k = static_cast<double>(optimizer_floats_per_param(config));
  const double dp = static_cast<double>(s.dp);
  out.memory.weights = 4 * P;
  out.memory.gradients = 4 * P;
  out.memory.optimizer = 4 * k * P / (zero >= 1 ? dp : 1.0);
  if (!plan.model_parallel && zero >= 2) out.memory.gradients = 4 * P / dp;
  if (!plan.model_parallel && zero == 3) {
    out.memory.weights = 4 * P / dp + 2 * 4 * static_cast<double>(worst.largest_group);
  }
  if (config.sync.method == SyncKind::kDiloco && replicas > 1) {
    out.memory.optimizer += 8 * P;  // theta_global and the outer momentum
  }
  const double bucket_bytes = config.parallel.bucket_mb * (1 << 20);
  out.memory.buffers =
      4.0 * static_cast<double>(worst.saved_floats) / v + (replicas > 1 ? 2 * bucket_bytes : 0.0);
  if (plan.model_parallel && pp > 1) out.memory.buffers += 4.0 * 4 * BT * static_cast<double>(C);
  // The model-parallel evaluation runs stage by stage with buffers of its own: one micro-batch's
  // saved floats of a chunk and its input and output.
  if (plan.model_parallel) {
    out.memory.buffers += 4.0 * (static_cast<double>(worst.saved_floats) / v + 2 * BT * C);
  }
  // An asynchronous checkpoint copies this rank's pieces (parameters and optimizer state) to
  // write them while training goes on.
  if (config.train.async_checkpoint)
    out.memory.buffers += out.memory.weights + out.memory.optimizer;
  out.memory.overhead = cluster.process_overhead_mib * (1 << 20);
  // The communicators this rank shares with others: the world, and under model parallelism
  // each mesh axis of more than one rank, dp x ep, and the tied embedding's.
  int communicators = plan.world > 1 ? 1 : 0;
  if (plan.model_parallel) {
    communicators += (s.pp > 1) + (s.dp > 1) + (s.ep > 1) + (s.tp > 1) + (s.ep > 1) + (s.pp > 1);
  }
  out.memory.buffers += communicators * cluster.communicator_mib * (1 << 20);

  // The update: about 28 bytes per owned parameter through memory.
  const double owned = zero >= 1 ? P / dp : P;
  out.time.optimizer = 28 * owned / (dev.memory_bandwidth_gbs * 1e9 * cluster.device_share());
  // The loop's own collectives each step: the loss and norm all-reduce over the replicas and the
  // straggler exchange over the world (train.straggler_threshold > 0), rounds of a ring.
  const LinkSpec& world_link = cluster.nodes > 1 ? cluster.cluster_link : cluster.node_link;
  double scalars = 0;
  if (plan.world > 1) {
    const int w = static_cast<int>(plan.world);
    scalars += static_cast<double>(all_reduce_f32_traffic(2, w, 0).rounds) * world_link.rtt_s();
    if (config.train.straggler_threshold > 0)
      scalars += static_cast<double>(ring_allgather_rounds(w)) * world_link.rtt_s();
    scalars *= stretch;
  }
  out.time.step = makespan + out.time.dp_exposed + out.time.optimizer + scalars;
  out.time.bubble += scalars;

  out.tokens_per_step = static_cast<double>(B * m * replicas * T);
  out.tokens_per_s = out.tokens_per_step / out.time.step;
  const double model_flops =
      train_flops_per_example(config.model, 0) * static_cast<double>(B * m * replicas);
  const double peak = bf16 ? dev.peak_flops_bf16 : dev.peak_flops;
  const double devices = static_cast<double>(plan.world) * cluster.device_share();
  out.mfu = model_flops / (out.time.step * devices * peak);
  out.joules_per_token = devices * dev.watts * out.time.step / out.tokens_per_step;
  return out;
}

}  // namespace brigade
