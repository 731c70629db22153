// Config::validate(): every range and cross-field rule, checked before any work starts.
// Each message names the key, the value and what is allowed.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/model/lora.h"
#include "brigade/runtime/config.h"

namespace brigade {

namespace {

// A string value in quotes, cut to a readable length: values come from files and command lines.
std::string quote(const std::string& value) {
  constexpr size_t kMax = 120;
  std::string out = "\"";
  out.append(value, 0, kMax);  // (appended piecewise: GCC 12 warns on "\"" + (a + b))
  out += value.size() > kMax ? "...\"" : "\"";
  return out;
}

// A named choice's value as the config spells it.
template <NamedEnum E>
std::string quote(E value) {
  return fmt::format("\"{}\"", value);
}

template <typename T>
void require(bool ok, const char* key, const T& value, const std::string& allowed) {
  if (!ok) throw ConfigError(fmt::format("{} = {}: {}", key, value, allowed));
}

void require_one_of(const std::string& value, const char* key,
                    std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return;
    list += (list.empty() ? "" : ", ") + fmt::format("\"{}\"", a);
  }
  throw ConfigError(fmt::format("{} = {}: allowed values are {}", key, quote(value), list));
}

void require_range(int64_t value, const char* key, int64_t lo, int64_t hi) {
  require(value >= lo && value <= hi, key, value, fmt::format("must be in [{}, {}]", lo, hi));
}

void require_real(double value, const char* key, double lo, double hi, bool lo_open) {
  bool ok = std::isfinite(value) && (lo_open ? value > lo : value >= lo) && value <= hi;
  require(ok, key, value, fmt::format("must be in {}{}, {}]", lo_open ? "(" : "[", lo, hi));
}

// The payloads each sync.method can put on the wire ("auto" is always allowed).
std::vector<const char*> payloads_of(SyncKind method) {
  if (method == SyncKind::kDdp) return {"auto", "f32", "bf16"};
  if (method == SyncKind::kDiloco)
    return {"auto", "f32", "int8", "dct_topk", "1bit", "powersgd", "powersgd_bf16"};
  if (method == SyncKind::kDemo) return {"auto", "f32", "bf16", "1bit"};
  if (method == SyncKind::kPowerSgd) return {"auto", "f32"};
  if (method == SyncKind::kSignEf) return {"auto", "1bit"};
  if (method == SyncKind::kPs || method == SyncKind::kFed) return {"auto", "f32"};
  return {"auto", "f32", "bf16"};  // topk
}

void validate_sync(const SyncConfig& sync, const ParallelConfig& parallel) {
  std::string list;
  bool known = false;
  for (const char* p : payloads_of(sync.method)) {
    known |= sync.payload == p;
    list += (list.empty() ? "" : ", ") + fmt::format("\"{}\"", p);
  }
  require(known, "sync.payload", quote(sync.payload),
          fmt::format("allowed values with sync.method = \"{}\" are {}", sync.method, list));
  require_range(sync.inner_steps, "sync.inner_steps", 1, 1 << 30);
  require_real(sync.outer_lr, "sync.outer_lr", 0.0, 1e3, true);
  require_real(sync.outer_momentum, "sync.outer_momentum", 0.0, 0.999999, false);
  require_range(sync.fragments, "sync.fragments", 1, sync.inner_steps);
  require_range(sync.int8_chunk, "sync.int8_chunk", 1, 0xffffffffLL);
  require_range(sync.dct_k, "sync.dct_k", 1, 4096);
  require_range(sync.dct_chunk, "sync.dct_chunk", 1, 64);
  require_one_of(sync.dct_values, "sync.dct_values", {"f32", "bf16", "1bit"});
  require_range(sync.sign_block, "sync.sign_block", 8, 1 << 30);
  require_real(sync.residual_decay, "sync.residual_decay", 0.0, 1.0, true);
  require_real(sync.quorum, "sync.quorum", 0.0, 1.0, true);
  require(sync.quorum == 1.0 || sync.method == SyncKind::kDiloco, "sync.quorum",
          fmt::format("{}", sync.quorum),
          "only sync.method = \"diloco\" can leave replicas out (other methods exchange every "
          "step); use 1");
  require_real(sync.outer_deadline_s, "sync.outer_deadline_s", 0.0, 86400.0, true);
  require(sync.quorum == 1.0 || sync.payload.rfind("powersgd", 0) != 0, "sync.quorum",
          fmt::format("{}", sync.quorum),
          fmt::format("sync.payload = \"{}\" compresses the replicas' mean with collectives and "
                      "cannot leave replicas out; use 1, or payload f32, int8, dct_topk or 1bit",
                      sync.payload));
  require_range(sync.quorum_retries, "sync.quorum_retries", 0, 1000);
  require_one_of(sync.outer_aggregator, "sync.outer_aggregator",
                 {"mean", "median", "trimmed_mean", "krum", "multi_krum"});
  require_real(sync.outer_trim_fraction, "sync.outer_trim_fraction", 0.0, 0.499999, false);
  require_range(sync.outer_byzantine, "sync.outer_byzantine", 0, 1 << 20);
  require_real(sync.outer_norm_bound, "sync.outer_norm_bound", 0.0, 1e12, false);
  require((sync.outer_aggregator == "mean" && sync.outer_norm_bound == 0) || sync.quorum < 1.0,
          sync.outer_aggregator != "mean" ? "sync.outer_aggregator" : "sync.outer_norm_bound",
          sync.outer_aggregator != "mean" ? quote(sync.outer_aggregator)
                                          : fmt::format("{}", sync.outer_norm_bound),
          "applies to diloco with sync.quorum < 1, whose outer steps see each replica's "
          "pseudo-gradient");
  require_real(sync.demo_beta, "sync.demo_beta", 0.0, 0.999999, false);
  require_range(sync.demo_k, "sync.demo_k", 1, 4096);
  require_range(sync.demo_max_chunk, "sync.demo_max_chunk", 1, 64);
  require_range(sync.powersgd_rank, "sync.powersgd_rank", 1, 1 << 16);
  require_real(sync.topk_fraction, "sync.topk_fraction", 0.0, 1.0, true);
  require_range(sync.topk_k, "sync.topk_k", 0, INT64_MAX);
  if (sync.method == SyncKind::kDdp) {
    require(
        sync.payload == "auto" || parallel.grad_wire == "f32" || sync.payload == parallel.grad_wire,
        "sync.payload", fmt::format("\"{}\"", sync.payload),
        fmt::format("contradicts parallel.grad_wire = \"{}\" (set one of them)",
                    parallel.grad_wire));
    return;
  }
  require(parallel.zero == 0, "parallel.zero", parallel.zero,
          fmt::format("must be 0 with sync.method = \"{}\": ZeRO shards the gradient "
                      "all-reduce of DDP, which this method replaces",
                      sync.method));
  require(parallel.grad_wire == "f32", "parallel.grad_wire",
          fmt::format("\"{}\"", parallel.grad_wire),
          fmt::format("must be \"f32\" with sync.method = \"{}\" (its wire format is "
                      "sync.payload)",
                      sync.method));
}

// [ps] keys are checked whatever the method (a typo is reported before someone turns them on);
// the job's size against ps.servers is checked where it is known (train/ps_roles.h).
void validate_ps(const PsConfig& ps, const SyncConfig& sync, const DataConfig& data) {
  require_range(ps.servers, "ps.servers", 1, 1024);
  require_one_of(ps.consistency, "ps.consistency", {"bsp", "ssp", "asp"});
  require_range(ps.staleness, "ps.staleness", 0, 1 << 20);
  require(!ps.staleness_lr || ps.consistency != "bsp" || sync.method != SyncKind::kPs,
          "ps.staleness_lr", "true",
          "applies to ps.consistency = \"ssp\" or \"asp\" (under bsp no update is stale)");
  require_range(ps.aggregate, "ps.aggregate", 1, 1 << 20);
  require(ps.aggregate == 1 || ps.consistency != "bsp" || sync.method != SyncKind::kPs,
          "ps.aggregate", std::to_string(ps.aggregate),
          "applies to ps.consistency = \"ssp\" or \"asp\" (bsp applies every worker's push as "
          "one update already)");
  require_one_of(ps.assignment, "ps.assignment", {"static", "dynamic"});
  if (sync.method != SyncKind::kPs || ps.assignment != "dynamic") return;
  require(ps.consistency != "bsp", "ps.assignment", "\"dynamic\"",
          "needs ps.consistency = \"ssp\" or \"asp\": under bsp every worker trains each step, "
          "so there is nothing to hand out");
  require(data.prompt_field.empty(), "ps.assignment", "\"dynamic\"",
          "does not take instruction data (data.prompt_field): its micro-batches are weighted by "
          "the targets of the whole step, which a dynamically assigned slice does not see");
}

// The robust-aggregation, privacy and attack keys of [fed] (docs/security.md).
void validate_fed_trust(const FedConfig& fed) {
  // Inside one job every role reads the same config, so a pair of keys goes together. A
  // federation started by hand (fed.clients > 0: `brigade fed-server`, `fed-client`) gives each
  // party its own: the coordinator lists the clients' public keys and never holds their secrets,
  // a client holds its secret and pins the coordinator's public key.
  const bool by_hand = fed.clients > 0;
  require(by_hand || fed.client_key.empty() == fed.client_public.empty(),
          fed.client_key.empty() ? "fed.client_public" : "fed.client_key",
          quote(fed.client_key.empty() ? fed.client_public : fed.client_key),
          "fed.client_key and fed.client_public go together: each client proves the key that "
          "the coordinator lists for it");
  require(by_hand || fed.coordinator_public.empty() || !fed.coordinator_key.empty(),
          "fed.coordinator_public", quote(fed.coordinator_public),
          "needs fed.coordinator_key: a coordinator without a long-term key cannot hold the "
          "pinned one");
  require_one_of(fed.aggregator, "fed.aggregator",
                 {"mean", "median", "trimmed_mean", "krum", "multi_krum"});
  require_real(fed.trim_fraction, "fed.trim_fraction", 0.0, 0.499999, false);
  require_range(fed.byzantine, "fed.byzantine", 0, 1 << 20);
  require_range(fed.krum_select, "fed.krum_select", 0, 1 << 20);
  require_real(fed.norm_bound, "fed.norm_bound", 0.0, 1e12, false);
  const bool krum = fed.aggregator == "krum" || fed.aggregator == "multi_krum";
  require(!krum || fed.min_clients > 2 * fed.byzantine + 2, "fed.min_clients", fed.min_clients,
          fmt::format("fed.aggregator = \"{}\" with fed.byzantine = {} needs more than 2f + 2 = {} "
                      "answers per round (Blanchard et al. 2017): set fed.min_clients to at "
                      "least {}",
                      fed.aggregator, fed.byzantine, 2 * fed.byzantine + 2, 2 * fed.byzantine + 3));
  require(fed.krum_select == 0 || fed.aggregator == "multi_krum", "fed.krum_select",
          fed.krum_select, "applies to fed.aggregator = \"multi_krum\"");
  require(fed.krum_select <= fed.min_clients, "fed.krum_select", fed.krum_select,
          fmt::format("must be at most fed.min_clients = {} (a round may have no more answers)",
                      fed.min_clients));
  require(fed.aggregator == "mean" || fed.strategy != "scaffold", "fed.aggregator",
          quote(fed.aggregator),
          "works with fed.strategy = \"fedavg\" or \"fedprox\": SCAFFOLD's control variates "
          "are averaged as they come and would let an attacker through");
  require_real(fed.dp_clip, "fed.dp_clip", 0.0, 1e12, false);
  require_real(fed.dp_noise, "fed.dp_noise", 0.0, 1e6, false);
  require_real(fed.dp_delta, "fed.dp_delta", 1e-300, 0.999999, true);
  require(fed.dp_noise == 0 || fed.dp_clip > 0, "fed.dp_noise", fed.dp_noise,
          "needs fed.dp_clip > 0: the noise is a multiple of the clipping bound");
  if (fed.dp_clip > 0) {
    require(fed.aggregator == "mean", "fed.aggregator", quote(fed.aggregator),
            "DP-FedAvg (fed.dp_clip > 0) noises the clipped mean: use \"mean\"");
    require(fed.strategy != "scaffold", "fed.strategy", quote(fed.strategy),
            "SCAFFOLD's control variates would leave un-noised: DP-FedAvg (fed.dp_clip > 0) "
            "works with \"fedavg\" or \"fedprox\"");
  }
  require_real(fed.secagg_clip, "fed.secagg_clip", 0.0, 1e9, true);
  require_range(fed.secagg_threshold, "fed.secagg_threshold", 0, 255);
  require(fed.secagg_threshold != 1, "fed.secagg_threshold", fed.secagg_threshold,
          "0 (half the asked clients + 1) or 2 to 255: one share reveals a secret");
  require_real(fed.secagg_step_s, "fed.secagg_step_s", 0.0, 86400.0, true);
  if (fed.secure_aggregation) {
    require(fed.aggregator == "mean", "fed.aggregator", quote(fed.aggregator),
            "needs each client's update, which secure aggregation hides: use \"mean\" with "
            "fed.secure_aggregation = true");
    require(fed.strategy != "scaffold", "fed.strategy", quote(fed.strategy),
            "SCAFFOLD's control variates are not securely aggregated yet: use \"fedavg\" or "
            "\"fedprox\" with fed.secure_aggregation = true");
    require(fed.norm_bound == 0, "fed.norm_bound", fed.norm_bound,
            "is applied by the coordinator to each update, which secure aggregation hides");
    require(fed.min_clients >= 2, "fed.min_clients", fed.min_clients,
            "must be at least 2 with fed.secure_aggregation = true (the sum of one client is "
            "its update)");
    // Each client's noise share has deviation z C / sqrt(t) <= z C / sqrt(2): at 4 deviations a
    // value is clipped once in 16,000.
    const double share = fed.dp_noise * fed.dp_clip / std::sqrt(2.0);
    require(fed.dp_noise == 0 || fed.secagg_clip >= 4 * share, "fed.secagg_clip", fed.secagg_clip,
            fmt::format("must be at least 4 x dp_noise x dp_clip / sqrt(2) = {:.4g} with "
                        "fed.secure_aggregation and DP noise: each client's noised values are "
                        "clipped there, which would cut the noise",
                        4 * share));
    require(fed.secagg_threshold <= fed.min_clients, "fed.secagg_threshold", fed.secagg_threshold,
            fmt::format("must be at most fed.min_clients = {}: a round with the fewest answers "
                        "must still unmask",
                        fed.min_clients));
  }
  require_one_of(fed.attack, "fed.attack",
                 {"none", "sign_flip", "scale", "noise", "label_flip", "nan"});
  require_range(fed.attackers, "fed.attackers", 0, 1 << 20);
  require((fed.attack == "none") == (fed.attackers == 0), "fed.attackers", fed.attackers,
          fed.attack == "none" ? "applies with fed.attack set to an attack"
                               : "must be at least 1 when fed.attack is set (clients 0 .. "
                                 "attackers - 1 attack)");
  require_real(fed.attack_scale, "fed.attack_scale", -1e6, 1e6, false);
  require_real(fed.attack_noise, "fed.attack_noise", 0.0, 1e6, false);
}

// [fed] keys are checked whatever the method; the rules that tie them to the model and data
// apply with sync.method = "fed". The job's size is checked where it is known (train/fed_roles.h).
void validate_fed(const FedConfig& fed, const SyncConfig& sync, const ModelConfig& model,
                  const DataConfig& data, const ParallelConfig& parallel) {
  require_range(fed.rounds, "fed.rounds", 1, 1 << 24);
  require_range(fed.clients, "fed.clients", 0, 1 << 20);
  require(fed.coordinator.empty() || fed.coordinator.find(':') != std::string::npos,
          "fed.coordinator", quote(fed.coordinator),
          "must be the coordinator's host:port (its fed.bind), for example \"10.0.0.1:29600\"");
  require_range(fed.clients_per_round, "fed.clients_per_round", 0, 1 << 20);
  require_range(fed.min_clients, "fed.min_clients", 1, 1 << 20);
  require(fed.clients_per_round == 0 || fed.min_clients <= fed.clients_per_round, "fed.min_clients",
          fed.min_clients,
          fmt::format("must be at most fed.clients_per_round = {} (a round never has more "
                      "answers than clients asked)",
                      fed.clients_per_round));
  require_range(fed.local_epochs, "fed.local_epochs", 1, 1 << 20);
  require_range(fed.local_steps, "fed.local_steps", 0, 1 << 30);
  require_real(fed.round_deadline_s, "fed.round_deadline_s", 0.0, 7 * 86400.0, true);
  require_range(fed.round_retries, "fed.round_retries", 0, 1000);
  require_one_of(fed.strategy, "fed.strategy", {"fedavg", "fedprox", "scaffold"});
  require_real(fed.mu, "fed.mu", 0.0, 1e6, false);
  require_one_of(fed.server_optimizer, "fed.server_optimizer", {"avg", "avgm", "adam", "yogi"});
  require_real(fed.server_lr, "fed.server_lr", 0.0, 1e3, true);
  require_real(fed.server_momentum, "fed.server_momentum", 0.0, 0.999999, false);
  require_real(fed.server_beta1, "fed.server_beta1", 0.0, 0.999999, false);
  require_real(fed.server_beta2, "fed.server_beta2", 0.0, 0.999999, false);
  require_real(fed.server_tau, "fed.server_tau", 0.0, 1e3, true);
  require_range(fed.eval_every, "fed.eval_every", 0, 1 << 24);
  require_range(fed.ckpt_every, "fed.ckpt_every", 0, 1 << 24);
  validate_fed_trust(fed);
  if (sync.method != SyncKind::kFed) return;
  // Clients read the folders `brigade partition` writes: images for the classifiers, text
  // (train.txt) for a GPT.
  if (model.kind == ModelKind::kGpt) {
    require(data.source == DataSource::kText, "data.source", quote(data.source),
            "a federated GPT's clients read text folders written by `brigade partition --data "
            "text`: use \"text\"");
    require(data.tokenizer == TokenizerKind::kByte, "data.tokenizer", quote(data.tokenizer),
            "federated text uses byte tokens: with \"bpe\" each client would train merges of its "
            "own on its own text, and their models would not share a vocabulary");
    require(!fed.test_data.empty(), "fed.test_data", "\"\"",
            "must name the coordinator's held-out text (for example the validation.txt that "
            "`brigade partition --data text` writes)");
    require(fed.attack != "label_flip", "fed.attack", quote(fed.attack),
            "flips class labels; a language model's targets are next tokens (use \"sign_flip\", "
            "\"scale\", \"noise\" or \"nan\")");
    require(data.path.empty(), "data.path", quote(data.path),
            "no process of a federation reads it: each client reads its folder (fed.client_data) "
            "and the coordinator fed.test_data; leave data.path empty");
    require(model.lora_rank == 0, "lora.rank", model.lora_rank,
            "federated clients train and send the whole model; LoRA adapters under "
            "sync.method = \"fed\" are not supported yet (use 0)");
  } else {
    require(data.source == DataSource::kFashionMnist, "data.source", quote(data.source),
            fmt::format("federated {} clients read Fashion-MNIST folders written by `brigade "
                        "partition`: use \"fashion_mnist\" (or model.kind = \"gpt\" with "
                        "\"text\")",
                        model.kind));
  }
  require(!fed.client_data.empty(), "fed.client_data", "\"\"",
          "must name each client's folder, with {client} for its index (for example "
          "\"data/fmnist-dir0.5/client_{client}\", written by `brigade partition`)");
  require(parallel.dp <= 1 && parallel.tp == 1 && parallel.pp == 1 && parallel.zero == 0,
          "parallel", "a layout",
          "does not apply with sync.method = \"fed\": every client trains a whole model of its "
          "own; leave [parallel] at its defaults");
}

// LoRA keys ([lora]; docs/fine-tuning.md). As for MoE, each key is checked while adapters are
// off too; the rules against other sections only apply with lora.rank > 0.
void validate_lora(const ModelConfig& model, const SyncConfig& sync) {
  require(model.lora_rank >= 0 && model.lora_rank <= 65536, "lora.rank", model.lora_rank,
          "must be in [0, 65536] (0 = no adapters)");
  require_real(model.lora_alpha, "lora.alpha", 0.0, 1e6, true);
  parse_lora_targets(model.lora_targets);  // names lora.targets, the value and the allowed ones
  if (model.lora_rank == 0) return;
  const std::string rank = fmt::format("{}", model.lora_rank);
  require(
      model.kind == ModelKind::kGpt, "lora.rank", rank,
      fmt::format("adapters are for GPT models; model.kind = \"{}\" has none (use 0)", model.kind));
  require(!model.lora_targets.empty(), "lora.targets", "[]",
          "must name at least one layer to adapt with lora.rank > 0 (\"attn.c_attn\", "
          "\"attn.c_proj\", \"mlp.c_fc\", \"mlp.c_proj\")");
  require(model.lora_rank <= model.d_model, "lora.rank", rank,
          fmt::format("must be at most model.d_model = {} (the smallest side of an adapted "
                      "layer)",
                      model.d_model));
  require(model.n_experts == 0, "lora.rank", rank,
          fmt::format("adapters are supported on dense GPT blocks only (model.n_experts = {}); "
                      "use model.n_experts = 0",
                      model.n_experts));
  require(sync.method == SyncKind::kDdp, "lora.rank", rank,
          fmt::format("needs sync.method = \"ddp\" (the base weights are frozen, which "
                      "sync.method = \"{}\" does not apply)",
                      sync.method));
}

// Mixture-of-experts keys (model.n_experts > 0 turns them on; docs/parallelism.md). Every key
// is checked on its own even while MoE is off, so a typo such as capacity_factor = nan is
// reported before someone turns experts on; the rules between keys only apply with experts.
void validate_moe(const ModelConfig& model, const ParallelConfig& parallel) {
  require_range(model.n_experts, "model.n_experts", 0, 4096);
  require(model.moe_top_k == 1 || model.moe_top_k == 2, "model.moe_top_k", model.moe_top_k,
          "allowed values are 1, 2");
  require(std::isfinite(model.capacity_factor) && model.capacity_factor <= 1e6,
          "model.capacity_factor", model.capacity_factor,
          "must be finite and at most 1e6 (<= 0 means dropless)");
  require_real(model.aux_loss_coef, "model.aux_loss_coef", 0.0, 1e3, false);
  require_range(model.moe_every, "model.moe_every", 1, 1024);
  require_range(parallel.ep, "parallel.ep", 1, 1 << 16);
  require(parallel.ep == 1 || model.n_experts > 0, "parallel.ep", parallel.ep,
          "must be 1 without mixture-of-experts blocks (model.n_experts = 0): there are no "
          "experts to split");
  if (model.n_experts == 0) return;
  require(model.kind == ModelKind::kGpt, "model.n_experts", model.n_experts,
          fmt::format("mixture-of-experts blocks need model.kind = \"gpt\" (got \"{}\"); use 0",
                      model.kind));
  require(model.moe_top_k <= model.n_experts, "model.moe_top_k", model.moe_top_k,
          fmt::format("must be at most model.n_experts = {}", model.n_experts));
  require_range(model.moe_every, "model.moe_every", 1, model.n_layer);
  require(parallel.tp == 1, "model.n_experts", model.n_experts,
          fmt::format("mixture-of-experts blocks are not supported with parallel.tp = {} yet; "
                      "use tp = 1 (pipeline and expert parallelism are supported)",
                      parallel.tp));
  require(model.n_experts % parallel.ep == 0, "parallel.ep", parallel.ep,
          fmt::format("must divide model.n_experts = {} (each ep rank holds n_experts / ep "
                      "experts of every MoE block)",
                      model.n_experts));
}

bool valid_name(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

// The JSONL field keys: only for data.source = "jsonl"; prompt and response fields together,
// instead of a text field; instruction data without expert parallelism (its loss weights
// micro-batches and replicas by their unmasked targets, data/micro_batch_weights.h).
void validate_data_fields(const DataConfig& data, const ParallelConfig& parallel,
                          const SyncConfig& sync) {
  const bool instruction = !data.prompt_field.empty() || !data.response_field.empty();
  // A federation's text is each client's folder (fed.client_data) and the coordinator's
  // fed.test_data: no process reads data.path (validate_fed).
  const bool federated = sync.method == SyncKind::kFed;
  require(federated || !data.path.empty() ||
              (data.source != DataSource::kText && data.source != DataSource::kJsonl),
          "data.path", "\"\"",
          fmt::format("data.source = {} needs a file, a folder or a glob of files",
                      quote(data.source)));
  const DataConfig defaults;
  for (const auto& [key, value, unset] :
       {std::tuple{"data.text_field", &data.text_field, defaults.text_field},
        std::tuple{"data.prompt_field", &data.prompt_field, defaults.prompt_field},
        std::tuple{"data.response_field", &data.response_field, defaults.response_field}}) {
    require(*value == unset || data.source == DataSource::kJsonl, key, quote(*value),
            fmt::format("names a JSONL field; it needs data.source = \"jsonl\", not {}",
                        quote(data.source)));
  }
  if (!instruction) {
    require(data.source != DataSource::kJsonl || !data.text_field.empty(), "data.text_field",
            "\"\"", "must name the string field that holds each record's text");
    return;
  }
  require(!data.prompt_field.empty(), "data.prompt_field", "\"\"",
          fmt::format("must be set with data.response_field = {} (instruction data needs both)",
                      quote(data.response_field)));
  require(!data.response_field.empty(), "data.response_field", "\"\"",
          fmt::format("must be set with data.prompt_field = {} (instruction data needs both)",
                      quote(data.prompt_field)));
  require(data.prompt_field != data.response_field, "data.response_field",
          quote(data.response_field), "must differ from data.prompt_field");
  require(data.text_field == defaults.text_field, "data.text_field", quote(data.text_field),
          "cannot be set with data.prompt_field / data.response_field (instruction records are "
          "read from those)");
  require(parallel.ep == 1, "data.prompt_field", quote(data.prompt_field),
          fmt::format("instruction data cannot run with parallel.ep = {}: experts mix the "
                      "tokens of several replicas, whose targets are counted apart (use "
                      "parallel.ep = 1)",
                      parallel.ep));
}

// The [parallel] keys of model parallelism, on their own and against the other sections. The
// layout against the world size and the model's shapes is checked by resolve_hybrid_layout
// (train/hybrid_layout.h), which `brigade launch` and the trainer call.
void validate_model_parallel(const ParallelConfig& parallel, const SyncConfig& sync,
                             const ModelConfig& model) {
  require_range(parallel.tp, "parallel.tp", 1, 1 << 16);
  require_range(parallel.pp, "parallel.pp", 1, 1 << 16);
  require_range(parallel.virtual_stages, "parallel.virtual_stages", 1, 1 << 10);
  require_one_of(parallel.schedule, "parallel.schedule", {"1f1b", "gpipe", "interleaved", "zb-h1"});
  const bool model_parallel = parallel.tp * parallel.pp * parallel.ep > 1;
  if (!model_parallel) return;
  const std::string layout = fmt::format("parallel.tp = {}, parallel.pp = {}, parallel.ep = {}",
                                         parallel.tp, parallel.pp, parallel.ep);
  require(model.kind == ModelKind::kGpt, "model.kind", fmt::format("\"{}\"", model.kind),
          fmt::format("must be \"gpt\" with {} (only the GPT has tensor-parallel and pipeline "
                      "pieces)",
                      layout));
  // Every replica sync method runs per pipeline chunk over the dp group (train/
  // model_parallel_engine.cc). Not yet: parameter servers and federations hold whole models;
  // a quorum's decision is per rank, and a replica's ranks would have to agree on it.
  require(sync.method != SyncKind::kPs && sync.method != SyncKind::kFed, "sync.method",
          fmt::format("\"{}\"", sync.method),
          fmt::format("is not supported with {} yet: parameter servers and federated clients "
                      "hold whole models (use \"ddp\", \"diloco\", \"demo\", \"powersgd\", "
                      "\"signef\" or \"topk\")",
                      layout));
  // With ep > 1 a replica's ranks hold other experts but the same dense tensors, and each syncs
  // its whole chunk over dp: a compression whose choices span tensors (top-k over the chunk,
  // sign or int8 blocks of the flat buffer) would pick differently on each ep rank, and the
  // replica's dense tensors would drift apart. Elementwise or per-tensor exchanges do not.
  const std::string payload = sync.payload == "auto" ? "f32" : sync.payload;
  const bool per_tensor =
      sync.method == SyncKind::kDdp || sync.method == SyncKind::kDemo ||
      sync.method == SyncKind::kPowerSgd ||
      (sync.method == SyncKind::kDiloco && (payload == "f32" || payload.rfind("powersgd", 0) == 0));
  require(parallel.ep == 1 || per_tensor, "sync.method", fmt::format("\"{}\"", sync.method),
          fmt::format("with sync.payload = {} is not supported with parallel.ep = {} yet: its "
                      "compression chooses across tensors, so the ep ranks of a replica would "
                      "drift apart in their dense tensors (use \"diloco\" with f32 or powersgd "
                      "pseudo-gradients, \"demo\" or \"powersgd\")",
                      quote(sync.payload), parallel.ep));
  require(sync.quorum == 1.0, "sync.quorum", sync.quorum,
          fmt::format("must be 1 with {}: the ranks of one replica would have to agree on "
                      "which replicas made the quorum (not supported yet)",
                      layout));
  // ZeRO-1/2 shard each chunk's optimizer state (and under 2 the gradient exchange) over dp
  // (parallel/dp_shard_update.h); the parameters stay whole on every dp rank, so no ZeRO-3.
  require(parallel.zero <= 2, "parallel.zero", parallel.zero,
          fmt::format("must be 0, 1 or 2 with {}: the model-parallel path supports ZeRO-1/2 on "
                      "the dp axis; ZeRO-3 (sharded parameters) is not supported there",
                      layout));
}

}  // namespace

void Config::validate() const {
  require(valid_name(run.name), "run.name", quote(run.name),
          "must be a non-empty folder name of letters, digits, '-', '_' and '.'");
  require(!run.out_dir.empty(), "run.out_dir", "\"\"", "must name a folder");
  require_range(run.seed, "run.seed", 0, INT64_MAX);
  require_range(run.stop_after, "run.stop_after", 0, INT64_MAX);

  if (model.kind == ModelKind::kGpt) {
    require(data.source != DataSource::kFashionMnist, "data.source", "\"fashion_mnist\"",
            "allowed values with model.kind = \"gpt\" are \"fortunes\", \"text\", \"jsonl\", "
            "\"shards\" (Fashion-MNIST is for the classifiers \"mlp\" and \"cnn\")");
    if (model.vocab == 0) {
      // From the data (train/training_data.h resolve_vocab_from_data), where it records one.
      require(data.source == DataSource::kShards || data.tokenizer == TokenizerKind::kByte,
              "model.vocab", "0",
              "from the data needs token shards or byte tokens: data.tokenizer = \"bpe\" trains "
              "its merges up to model.vocab, so give the size");
    } else if (data.tokenizer == TokenizerKind::kByte) {
      require_range(model.vocab, "model.vocab", 256, 1 << 20);
    } else {
      require_range(model.vocab, "model.vocab", 257, 65536);
    }
    require_range(model.seq_len, "model.seq_len", 1, 16384);
    require_range(model.d_model, "model.d_model", 1, 65536);
    require_range(model.n_layer, "model.n_layer", 1, 1024);
    require_range(model.n_head, "model.n_head", 1, model.d_model);
    if (model.d_model % model.n_head != 0) {
      throw ConfigError(fmt::format("model.n_head = {}: must divide model.d_model = {}",
                                    model.n_head, model.d_model));
    }
    if (data.seq_len > model.seq_len) {
      throw ConfigError(fmt::format("data.seq_len = {}: must be at most model.seq_len = {}",
                                    data.seq_len, model.seq_len));
    }
    require_range(data.seq_len, "data.seq_len", 0, model.seq_len);
  } else {
    require(
        data.source == DataSource::kFashionMnist, "data.source", fmt::format("\"{}\"", data.source),
        fmt::format("allowed values with model.kind = \"{}\" are \"fashion_mnist\"", model.kind));
    // The CNN may go from its conv stages straight to the output layer; an MLP without a
    // hidden layer would be softmax regression.
    require(model.kind == ModelKind::kCnn || !model.hidden.empty(), "model.hidden", "[]",
            "needs at least one hidden layer");
    for (int64_t h : model.hidden) require_range(h, "model.hidden[i]", 1, 1 << 20);
  }
  if (model.kind == ModelKind::kCnn) {
    require(!model.channels.empty() && model.channels.size() <= 2, "model.channels",
            fmt::format("[{}]", fmt::join(model.channels, ", ")),
            "needs 1 or 2 conv stages: conv 5x5 and max-pool 2x2 take a 28x28 image to 12x12, "
            "then 4x4, which a third stage cannot convolve");
    for (int64_t c : model.channels) require_range(c, "model.channels[i]", 1, 1 << 16);
  }
  validate_moe(model, parallel);
  validate_lora(model, sync);
  validate_data_fields(data, parallel, sync);
  require_real(data.val_fraction, "data.val_fraction", 0.0, 0.5, true);

  require_range(train.micro_batch, "train.micro_batch", 1, 1 << 20);
  require_range(train.grad_accum, "train.grad_accum", 1, 1 << 20);
  require_range(train.steps, "train.steps", 1, INT64_MAX / 2);
  require_one_of(train.optimizer, "train.optimizer", {"adamw", "sgd"});
  require_real(train.lr, "train.lr", 0.0, 1e3, true);
  require_real(train.min_lr, "train.min_lr", 0.0, train.lr, false);
  require_range(train.warmup, "train.warmup", 0, train.steps);
  require_real(train.weight_decay, "train.weight_decay", 0.0, 1e3, false);
  require_real(train.beta1, "train.beta1", 0.0, 0.999999, false);
  require_real(train.beta2, "train.beta2", 0.0, 0.999999999, false);
  require_real(train.eps, "train.eps", 0.0, 1.0, true);
  require_real(train.momentum, "train.momentum", 0.0, 0.999999, false);
  require_real(train.grad_clip, "train.grad_clip", 0.0, 1e9, false);
  require_range(train.eval_every, "train.eval_every", 0, INT64_MAX);
  require_range(train.eval_batches, "train.eval_batches", 1, 1 << 20);
  require_range(train.ckpt_every, "train.ckpt_every", 0, INT64_MAX);
  require_range(train.keep_checkpoints, "train.keep_checkpoints", 1, 1000);
  require_range(train.log_every, "train.log_every", 1, INT64_MAX);
  require_range(train.blas_threads, "train.blas_threads", 1, 256);
  require_one_of(train.kernels, "train.kernels", {"onednn", "openblas"});
  require_one_of(train.precision, "train.precision", {"f32", "bf16"});
  require(train.straggler_threshold == 0 ||
              (std::isfinite(train.straggler_threshold) && train.straggler_threshold > 1 &&
               train.straggler_threshold <= 1e6),
          "train.straggler_threshold", train.straggler_threshold,
          "must be 0 (no straggler detection) or a ratio to the median step time in (1, 1e6]");
  // Whether each pattern names a tensor is checked against the model's layout when the trainer
  // builds it (optim/trainable_mask.h); here only what needs no model.
  for (const std::string& pattern : train.freeze) {
    require(!pattern.empty() && pattern.size() <= 256, "train.freeze", quote(pattern),
            "each pattern must be a glob of 1..256 characters over tensor names (\"wte\", "
            "\"h.0.*\")");
  }
  require(train.freeze.empty() || sync.method == SyncKind::kDdp, "train.freeze",
          fmt::format("[{} pattern(s)]", train.freeze.size()),
          fmt::format("needs sync.method = \"ddp\" (DDP, ZeRO, tensor and pipeline parallelism); "
                      "sync.method = \"{}\" updates parameters its own way",
                      sync.method));

  require(monitor.peak_flops == 0 || (std::isfinite(monitor.peak_flops) &&
                                      monitor.peak_flops >= 1e6 && monitor.peak_flops <= 1e18),
          "monitor.peak_flops", monitor.peak_flops,
          "must be 0 (measure at start) or this rank's peak FLOP/s in [1e6, 1e18]");
  require_real(monitor.core_watts, "monitor.core_watts", 0.0, 1e4, false);
  require_real(monitor.grid_gco2_per_kwh, "monitor.grid_gco2_per_kwh", 0.0, 1e4, false);
  const auto& trace = monitor.trace_steps;
  require(trace.empty() || (trace.size() == 2 && trace[0] >= 1 && trace[0] <= trace[1] &&
                            trace[1] - trace[0] < 1000),
          "monitor.trace_steps", fmt::format("[{}]", fmt::join(trace, ", ")),
          "must be [] or [first, last] with 1 <= first <= last, at most 1000 steps (a trace holds "
          "every span of every step)");

  require_range(parallel.dp, "parallel.dp", 0, 1 << 20);
  require_real(parallel.bucket_mb, "parallel.bucket_mb", 0.0, 1 << 16, true);
  require_one_of(parallel.grad_wire, "parallel.grad_wire", {"f32", "bf16"});
  require_range(parallel.zero, "parallel.zero", 0, 3);
  require(parallel.zero < 3 || model.kind == ModelKind::kGpt, "parallel.zero", parallel.zero,
          fmt::format("ZeRO-3 gathers parameters layer group by layer group, which model.kind = "
                      "\"{}\" does not announce; use zero <= 2 or model.kind = \"gpt\"",
                      model.kind));
  require(parallel.zero <= 1 || parallel.grad_wire == "f32", "parallel.grad_wire",
          fmt::format("\"{}\"", parallel.grad_wire),
          fmt::format("must be \"f32\" with parallel.zero = {} (ZeRO-2/3 reduce-scatter f32 "
                      "gradients; bf16 needs zero <= 1)",
                      parallel.zero));

  validate_sync(sync, parallel);
  validate_ps(ps, sync, data);
  validate_fed(fed, sync, model, data, parallel);
  validate_model_parallel(parallel, sync, model);
  if (train.recompute == RecomputeMode::kBlock) {
    require(model.kind == ModelKind::kGpt, "train.recompute", "\"block\"",
            fmt::format("recomputes GPT blocks; model.kind = \"{}\" has none (use \"none\")",
                        model.kind));
    require(parallel.schedule != "zb-h1" || parallel.pp == 1, "train.recompute", "\"block\"",
            "cannot run with parallel.schedule = \"zb-h1\": its deferred weight gradients read "
            "the activations that recomputation does not keep (use \"1f1b\" or "
            "\"interleaved\")");
  }

  require(!comm.backend.empty(), "comm.backend", "\"\"", "must name a backend (\"gloo\")");
  require_real(comm.timeout_s, "comm.timeout_s", 0.0, 86400.0, true);
  require_one_of(comm.store, "comm.store", {"auto", "file", "tcp"});
  // A worker waiting at the staleness bound gives up after comm.timeout_s: a silent worker must
  // leave the bound before that.
  require_real(ps.worker_timeout_s, "ps.worker_timeout_s", 0.0, 86400.0, true);
  require(sync.method != SyncKind::kPs || ps.consistency == "bsp" ||
              ps.worker_timeout_s < comm.timeout_s,
          "ps.worker_timeout_s", ps.worker_timeout_s,
          fmt::format("must stay below comm.timeout_s = {} under ps.consistency = \"{}\" (the "
                      "others' wait at the staleness bound for a silent worker)",
                      comm.timeout_s, ps.consistency));
  require(!comm.host.empty(), "comm.host", "\"\"", "must be an address (127.0.0.1 for one host)");
  require_one_of(comm.transport, "comm.transport", {"auto", "tcp", "tls"});
  require(comm.transport != "tcp" || (comm.key.empty() && comm.peer_public.empty()),
          comm.key.empty() ? "comm.peer_public" : "comm.key",
          quote(comm.key.empty() ? comm.peer_public : comm.key),
          "is for comm.transport = \"tls\" (or \"auto\"); plain TCP proves no key");
  require(comm.peer_public.empty() || comm.peer_public.find("{rank}") != std::string::npos,
          "comm.peer_public", quote(comm.peer_public),
          "must name each rank's .pub file with {rank} for its rank (for example "
          "\"keys/peer_{rank}.pub\", written by `brigade keygen --kind tls`)");
  require(comm.peer_public.empty() || !comm.key.empty(), "comm.peer_public",
          quote(comm.peer_public),
          "needs comm.key: a rank with a fresh key would not be on the allow-list");
  // The replicas wait for rank 0's quorum decision through the store, bounded by comm.timeout_s.
  require(sync.quorum == 1.0 ||
              sync.outer_deadline_s * static_cast<double>(sync.quorum_retries + 1) < comm.timeout_s,
          "sync.outer_deadline_s", sync.outer_deadline_s,
          fmt::format("with sync.quorum_retries = {} rank 0 may wait (retries + 1) x deadline "
                      "= {} s for a quorum, which must stay below comm.timeout_s = {} (the "
                      "others' wait for its decision)",
                      sync.quorum_retries,
                      sync.outer_deadline_s * static_cast<double>(sync.quorum_retries + 1),
                      comm.timeout_s));
}

}  // namespace brigade
