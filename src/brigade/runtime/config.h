#pragma once
// A run's configuration: plain structs with a documented default per field. Loaded from TOML
// (configs/*.toml) with command-line overrides `--set section.key=value`, then validated as a
// whole before any work starts; every error names the key, the value and what is allowed.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "brigade/base/named_enum.h"
#include "brigade/fed/fed_config.h"

namespace brigade {

// model.kind: a GPT, or a classifier of 28x28 images (an MLP or a small CNN).
enum class ModelKind { kGpt, kMlp, kCnn };
template <>
struct EnumNames<ModelKind> {
  static constexpr std::array<std::string_view, 3> kNames = {"gpt", "mlp", "cnn"};
};

// sync.method: how data-parallel replicas agree (SyncConfig).
enum class SyncKind { kDdp, kDiloco, kDemo, kPowerSgd, kSignEf, kTopK, kPs, kFed };
template <>
struct EnumNames<SyncKind> {
  static constexpr std::array<std::string_view, 8> kNames = {"ddp",    "diloco", "demo", "powersgd",
                                                             "signef", "topk",   "ps",   "fed"};
};

// run.resume: continue from the run's latest checkpoint, or refuse a folder that has one.
enum class ResumeMode { kAuto, kNever };
template <>
struct EnumNames<ResumeMode> {
  static constexpr std::array<std::string_view, 2> kNames = {"auto", "never"};
};

// data.source: where the training data comes from (DataConfig).
enum class DataSource { kFortunes, kText, kJsonl, kShards, kFashionMnist };
template <>
struct EnumNames<DataSource> {
  static constexpr std::array<std::string_view, 5> kNames = {"fortunes", "text", "jsonl", "shards",
                                                             "fashion_mnist"};
};

// data.tokenizer: bytes, or BPE merges trained on the train split.
enum class TokenizerKind { kByte, kBpe };
template <>
struct EnumNames<TokenizerKind> {
  static constexpr std::array<std::string_view, 2> kNames = {"byte", "bpe"};
};

// train.recompute: keep every activation, or only block inputs (forwards run again).
enum class RecomputeMode { kNone, kBlock };
template <>
struct EnumNames<RecomputeMode> {
  static constexpr std::array<std::string_view, 2> kNames = {"none", "block"};
};

// train.on_nonfinite: what a non-finite loss or gradient norm does to the run.
enum class OnNonfinite { kStop, kSkip };
template <>
struct EnumNames<OnNonfinite> {
  static constexpr std::array<std::string_view, 2> kNames = {"stop", "skip"};
};

// Whether the method keeps gradients on each replica and exchanges something else, less often or
// compressed (ReplicaSync, sync/replica_sync.h): every method but DDP, parameter servers and
// federated learning.
constexpr bool is_low_communication(SyncKind m) {
  return m != SyncKind::kDdp && m != SyncKind::kPs && m != SyncKind::kFed;
}

struct RunConfig {
  std::string name = "default";  // the run folder is <out_dir>/<name>/
  std::string out_dir = "runs";
  int64_t seed = 1337;  // initialisation, data order, dropout-free sampling
  ResumeMode resume =
      ResumeMode::kAuto;   // "auto": continue from the run's latest checkpoint; "never"
  int64_t stop_after = 0;  // stop after this many steps in this invocation (0: run to the end)
};

struct ModelConfig {
  ModelKind kind = ModelKind::kGpt;
  int64_t vocab = 256;    // gpt: tokenizer vocabulary (256 for bytes)
  int64_t seq_len = 128;  // gpt: context length
  int64_t d_model = 128;  // gpt
  int64_t n_layer = 4;    // gpt
  int64_t n_head = 4;     // gpt
  // gpt, mixture of experts (docs/parallelism.md): 0 = dense MLPs; else every moe_every-th
  // block has n_experts expert MLPs behind a top-k router.
  int64_t n_experts = 0;
  int64_t moe_top_k = 1;          // 1 or 2
  double capacity_factor = 1.25;  // capacity = ceil(cf * tokens * top_k / E); <= 0: dropless
  double aux_loss_coef = 0.01;    // load-balancing loss weight
  int64_t moe_every = 1;          // blocks moe_every-1, 2 moe_every-1, ... are MoE
  // gpt, LoRA adapters (the [lora] section; docs/fine-tuning.md): with rank > 0 every layer
  // named in targets ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj") of every block
  // gains lora_A (rank, in) and lora_B (out, rank), scaled by alpha / rank, and they are all
  // that trains: every other parameter is frozen. 0 = no adapters.
  int64_t lora_rank = 0;
  double lora_alpha = 16.0;
  std::vector<std::string> lora_targets = {"attn.c_attn"};
  // mlp, cnn: widths of the hidden linear layers. The default is the MLP's; a cnn config that
  // does not set the key gets kCnnHidden instead (parse_config applies it), NIID-Bench's widths.
  std::vector<int64_t> hidden = {256, 128};
  static inline const std::vector<int64_t> kCnnHidden = {120, 84};
  // cnn: output channels of each conv stage (conv 5x5, ReLU, max-pool 2x2); 1 or 2 stages fit
  // a 28x28 image.
  std::vector<int64_t> channels = {6, 16};

  bool is_classifier() const { return kind != ModelKind::kGpt; }
};

struct DataConfig {
  // "fortunes" | "text" (plain text: a file, a folder or a glob) | "jsonl" (one JSON object per
  // line: a file, a folder or a glob) | "shards" (a folder written by `brigade tokenize`)
  // | "fashion_mnist"
  DataSource source = DataSource::kFortunes;
  std::string path;  // "" = the source's default location
  // jsonl: the string field of each record that is one document (unless instruction fields are
  // set).
  std::string text_field = "text";
  // jsonl instruction data (both or neither): each record is one example, prompt then
  // response, the loss on the response tokens only.
  std::string prompt_field;
  std::string response_field;
  TokenizerKind tokenizer =
      TokenizerKind::kByte;    // "byte" | "bpe" (trained on the train split; vocab = model.vocab)
  int64_t seq_len = 0;         // training context; 0 = model.seq_len; at most model.seq_len
  double val_fraction = 0.05;  // share of documents held out for validation
};

struct TrainConfig {
  int64_t micro_batch = 16;         // examples per forward/backward
  int64_t grad_accum = 1;           // micro-steps per optimizer step
  int64_t steps = 600;              // optimizer steps
  std::string optimizer = "adamw";  // "adamw" | "sgd"
  double lr = 1e-3;                 // peak learning rate
  double min_lr = 1e-4;             // end of the cosine decay
  int64_t warmup = 50;              // linear warmup steps
  double weight_decay = 0.1;        // decoupled, on matrices only
  double beta1 = 0.9;               // adamw
  double beta2 = 0.95;              // adamw
  double eps = 1e-8;                // adamw
  double momentum = 0.9;            // sgd
  bool nesterov = false;            // sgd
  double grad_clip = 1.0;           // global norm; 0 disables
  int64_t eval_every = 100;         // steps between validation passes (0: only at the end)
  int64_t eval_batches = 20;        // micro-batches per validation pass
  int64_t ckpt_every = 200;         // steps between checkpoints (0: only at the end)
  int64_t keep_checkpoints = 3;     // complete checkpoints kept
  bool async_checkpoint = true;     // write checkpoints in the background (false: blocking)
  int64_t log_every = 10;           // steps between log lines when not on a terminal
  int64_t blas_threads = 1;         // GEMM threads per process (oneDNN and OpenBLAS)
  std::string kernels = "onednn";   // GEMM library: "onednn" | "openblas" (gemm_backend.h)
  std::string precision = "f32";    // GEMM operands: "f32" | "bf16" (f32 accumulation, master)
  RecomputeMode recompute =
      RecomputeMode::kNone;  // "none" | "block": keep block inputs, re-run forwards
  OnNonfinite on_nonfinite = OnNonfinite::kStop;  // "stop" | "skip" (skip the update, keep going)
  // A rank whose busy time per step is at least this many times the median, 3 steps in a row,
  // is flagged as a straggler (monitor/straggler.h); 0 turns the per-step exchange off.
  double straggler_threshold = 1.5;
  // Start from another run's weights (a checkpoint folder, a run folder or a checkpoints root:
  // its newest valid checkpoint), into this run's layout; optimizer state and step start afresh.
  // "" = random initialisation. Unused once the run has a checkpoint of its own.
  std::string init_from;
  // Fine-tuning (docs/fine-tuning.md): fnmatch globs over the model's tensor names ("wte",
  // "h.0.*", "*.bias"; a pattern also names a module: "h.0" is every tensor under h.0.) whose
  // parameters stay exactly as they started (from init_from or the initialisation): no update,
  // no weight decay, no part in the gradient norm. [] = train everything.
  std::vector<std::string> freeze = {};
};

struct ParallelConfig {
  int64_t dp = 0;                 // data-parallel replicas; 0 = every process of the job
  double bucket_mb = 1.0;         // DDP gradient bucket size (MiB of f32)
  std::string grad_wire = "f32";  // gradient payload on the wire: "f32" | "bf16" (f32 accumulation)
  // Sharded data parallelism (docs/parallelism.md): 0 = DDP (everything replicated); ZeRO
  // stage 1 shards optimizer state, 2 also gradients, 3 also parameters.
  int64_t zero = 0;
  // Model parallelism (docs/parallelism.md, "Hybrid mesh"): the job is a pp x dp x ep x tp mesh
  // (dp = world / (pp * ep * tp) when parallel.dp = 0). With tp * pp * ep > 1 the trainer runs the
  // GPT as pipeline stages of tensor-parallel shards; train.grad_accum is the number of
  // micro-batches.
  int64_t tp = 1;  // tensor-parallel degree (Megatron split of every block)
  int64_t pp = 1;  // pipeline stages (ranks along the pipeline)
  // Expert parallelism: the experts of every MoE block are split over ep ranks, carved out of
  // the data replicas (ranks of one ep group read different data); needs model.n_experts a
  // multiple of ep. ep > 1 runs on the model-parallel path (with any tp = 1, pp).
  int64_t ep = 1;
  bool sequence_parallel = false;  // tp > 1: layernorm/residual on sequence shards
  // Average gradient buckets over the replicas while backward runs (DDP, ZeRO-1, and the dp
  // axis of tp/pp); false: after it, all at once (to measure what the overlap hides).
  bool overlap_grad_reduce = true;
  std::string schedule = "1f1b";  // "1f1b" | "gpipe" | "interleaved" | "zb-h1"
  int64_t virtual_stages = 1;     // interleaved: chunks per pipeline rank
  std::vector<int64_t> layer_split =
      {};  // blocks per stage (pp * virtual_stages entries); [] = balanced
};

// How data-parallel replicas agree (docs/low-communication.md). "ddp" all-reduces gradients
// every step (parallel.zero picks DDP or a ZeRO stage); the others keep gradients local and
// exchange far less: DiLoCo's periodic pseudo-gradient average, DeMo's top-k DCT coefficients,
// or a compressed gradient (PowerSGD, EF-signSGD, top-k with error feedback).
struct SyncConfig {
  // "ddp" | "diloco" | "demo" | "powersgd" | "signef" | "topk" | "ps" (parameter servers, [ps])
  // | "fed" (federated learning, [fed])
  SyncKind method = SyncKind::kDdp;
  // Wire format of the exchange; "auto" = the method's default (ddp: parallel.grad_wire,
  // signef: "1bit", others "f32"). ddp: f32, bf16; diloco: f32, int8, dct_topk, 1bit; demo:
  // f32, bf16, 1bit;
  // powersgd: f32; signef: 1bit; topk: f32, bf16.
  std::string payload = "auto";
  int64_t inner_steps = 50;     // diloco: H, inner steps between outer steps
  double outer_lr = 0.7;        // diloco: outer SGD learning rate
  double outer_momentum = 0.9;  // diloco: outer momentum
  bool nesterov = true;         // diloco: Nesterov (true) or heavy-ball outer momentum
  int64_t fragments = 1;        // diloco: streaming fragments synced staggered (1 = plain)
  int64_t int8_chunk = 262144;  // diloco int8: values per quantization chunk
  // diloco dct_topk: the pseudo-gradient's top dct_k DCT coefficients per chunk of edge
  // <= dct_chunk, values "f32" | "bf16" | "1bit" (sign times a per-chunk scale), with error
  // feedback per replica.
  int64_t dct_k = 32;
  int64_t dct_chunk = 64;
  std::string dct_values = "bf16";
  double residual_decay = 1.0;  // diloco dct_topk: e = residual_decay e + Delta (SparseLoCo)
  // diloco 1bit: the error-fed 1-bit all-reduce (sign times a scale per block of <= sign_block
  // values of one tensor).
  int64_t sign_block = 256;
  // diloco, peers come and go (docs/low-communication.md): < 1 sends outer steps through the
  // store, and an outer step averages the replicas that report within outer_deadline_s, at
  // least ceil(quorum * replicas) of them (else it waits quorum_retries more deadlines, then
  // stops). 1 = every replica, by collectives.
  double quorum = 1.0;
  double outer_deadline_s = 20;  // diloco with quorum < 1: the coordinator's wait per attempt
  int64_t quorum_retries = 1;    // diloco with quorum < 1: extra deadlines before stopping
  // diloco with quorum < 1: how the members' pseudo-gradients are combined (docs/security.md):
  // "mean" | "median" | "trimmed_mean" | "krum" | "multi_krum", and an L2 bound each is scaled
  // down to first (0: none). A non-finite pseudo-gradient is always left out.
  std::string outer_aggregator = "mean";
  double outer_trim_fraction = 0.1;
  int64_t outer_byzantine = 0;
  double outer_norm_bound = 0;
  double demo_beta = 0.999;      // demo: residual decay
  int64_t demo_k = 32;           // demo: coefficients sent per chunk
  int64_t demo_max_chunk = 64;   // demo: chunk edge limit (1..64)
  int64_t powersgd_rank = 4;     // powersgd: rank r
  double topk_fraction = 0.001;  // topk: share of gradient entries sent per step
  int64_t topk_k = 0;            // topk: entries sent per step; > 0 overrides topk_fraction
};

// sync.method = "ps": the last `servers` ranks of the job serve parameters, the others train
// (sync/ps/, docs/parameter-servers.md).
struct PsConfig {
  int64_t servers = 1;
  std::string consistency = "bsp";  // "bsp" | "ssp" | "asp"
  int64_t staleness = 2;            // ssp: a worker at clock c waits until every clock >= c - s
  bool staleness_lr = false;        // ssp, asp: divide an update's step by its staleness (>= 1)
  int64_t aggregate = 1;            // ssp, asp: pushes a server applies as one update (<= workers)
  double worker_timeout_s = 10.0;   // ssp, asp: a worker silent this long leaves the bound
  // "static": worker w trains slice w of every global batch; "dynamic" (ssp, asp): each worker
  // takes the next unassigned slice of the global data order when it is ready, so faster workers
  // train more of it and a clock is the global step of the slice
  std::string assignment = "static";
  std::string bind;  // address servers bind; empty: comm.host
};

struct CommConfig {
  std::string backend = "gloo";  // registered communicator backend
  double timeout_s = 60;         // every collective and the rendezvous give up after this
  // "auto": the file store `brigade launch` provides (BRIGADE_STORE_DIR), else a TCP store on
  // MASTER_ADDR:MASTER_PORT hosted by rank 0; "file" | "tcp" force one.
  std::string store = "auto";
  std::string host = "127.0.0.1";  // address this rank's transport binds and advertises
  // The collectives' transport (docs/security.md): "tls" is TLS 1.3 between every pair of ranks,
  // each proving its Ed25519 key; "tcp" is Gloo's plain TCP; "auto" is tls unless `host` is a
  // loopback address (127.0.0.0/8, ::1, localhost), where the traffic never leaves the machine.
  std::string transport = "auto";
  // tls: this rank's long-term key, a `brigade keygen --kind tls` .key file ({rank} is replaced
  // by the rank); "" = a fresh key for each job, published in the job's rendezvous store.
  std::string key;
  // tls: the allow-list, a .pub path with {rank}, read for every rank of the job; a rank whose
  // key is not on it is refused. "" = any key published in the job's store (token holders).
  std::string peer_public;
};

// What the run reports about itself (docs/metrics.md).
struct MonitorConfig {
  // This rank's peak FLOP/s, the denominator of MFU; 0 = measured at start by a short GEMM
  // calibration on the run's own kernels and threads.
  double peak_flops = 0;
  // Energy where no RAPL counter serves (monitor/energy.h): watts of one busy core. 5 W is a
  // server package's TDP over its cores (AMD EPYC 7763: 280 W / 64; Intel Xeon 8380: 270 W / 40).
  double core_watts = 5.0;
  // Grid carbon intensity for the summary's CO2, in g per kWh: about the world average of 2023
  // (Ember, Global Electricity Review 2024: 480); set your grid's.
  double grid_gco2_per_kwh = 480.0;
  // [a, b]: write a Chrome trace of steps a..b (1-based) of every rank to runs/<name>/trace.json
  // (monitor/trace.h); [] = none.
  std::vector<int64_t> trace_steps = {};
};

struct Config {
  RunConfig run;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  ParallelConfig parallel;
  SyncConfig sync;
  PsConfig ps;
  FedConfig fed;
  CommConfig comm;
  MonitorConfig monitor;

  // Throws ConfigError naming the key, the value and what is allowed.
  void validate() const;
  // The resolved configuration as TOML, every field written (it is what the run folder keeps).
  std::string to_toml() const;
  // The training context length (data.seq_len, or model.seq_len when 0).
  int64_t context() const { return data.seq_len > 0 ? data.seq_len : model.seq_len; }
};

// Reads a TOML file and applies overrides of the form "section.key=value" (value in TOML
// syntax; a bare word is taken as a string). Unknown sections or keys and wrong types are
// ConfigErrors. Does not validate ranges: call validate().
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// The same from TOML text (used by tests and by checkpoints, which store the resolved config).
Config parse_config(const std::string& toml_text, const std::string& origin,
                    const std::vector<std::string>& overrides = {});

}  // namespace brigade
