#include "brigade/train/sync_strategy.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/sync/compressed_grad_sync.h"
#include "brigade/sync/demo_sync.h"
#include "brigade/sync/diloco_sync.h"
#include "brigade/sync/ps/ps_worker.h"
#include "brigade/sync/replica_sync.h"
#include "brigade/train/job_check.h"
#include "brigade/train/model_factory.h"

namespace brigade {

namespace {

std::unique_ptr<SyncMethod> make_method(const Config& config, const SyncedParams& synced,
                                        Communicator& dp, std::shared_ptr<Store> store,
                                        std::function<void(const std::string&)> log) {
  const SyncConfig& s = config.sync;
  const std::string payload = resolved_payload(s, config.parallel);
  const ParamLayout& layout = *synced.layout;
  if (s.method == SyncKind::kDiloco) {
    DilocoConfig c{
        .outer_lr = static_cast<float>(s.outer_lr),
        .momentum = static_cast<float>(s.outer_momentum),
        .nesterov = s.nesterov,
        .wire = payload == "int8"                   ? OuterWire::kInt8
                : payload == "dct_topk"             ? OuterWire::kDctTopk
                : payload == "1bit"                 ? OuterWire::kSign
                : payload.rfind("powersgd", 0) == 0 ? OuterWire::kPowerSgd
                                                    : OuterWire::kF32,
        .int8_chunk = s.int8_chunk,
        .dct = {.k = static_cast<int>(s.dct_k),
                .max_chunk = static_cast<int>(s.dct_chunk),
                .values = parse_value_format(s.dct_values, "sync.dct_values")},
        .residual_decay = static_cast<float>(s.residual_decay),
        .sign_block = s.sign_block,
        .powersgd = {.rank = static_cast<int>(s.powersgd_rank),
                     .seed = static_cast<uint64_t>(config.run.seed),
                     .wire = payload == "powersgd_bf16" ? WireDtype::kBF16 : WireDtype::kF32},
        .outer_rule = {.name = s.outer_aggregator,
                       .trim_fraction = s.outer_trim_fraction,
                       .byzantine = s.outer_byzantine},
        .outer_norm_bound = s.outer_norm_bound};
    std::unique_ptr<QuorumExchange> quorum;
    if (s.quorum < 1.0) {
      if (!store) {
        throw ConfigError(fmt::format(
            "sync.quorum = {}: needs the job's rendezvous store, and this communicator has none",
            s.quorum));
      }
      quorum = std::make_unique<QuorumExchange>(
          std::make_shared<PrefixStore>("quorum/" + dp.name(), std::move(store)), dp.size(),
          dp.rank(),
          QuorumOptions{.quorum = s.quorum,
                        .deadline = std::chrono::milliseconds(
                            static_cast<int64_t>(std::ceil(s.outer_deadline_s * 1e3))),
                        .retries = static_cast<int>(s.quorum_retries)},
          std::move(log));
      check_outer_quorum(s, dp.size());
    }
    return std::make_unique<DilocoSync>(c, s.inner_steps, static_cast<int>(s.fragments), layout,
                                        synced.params, std::move(quorum), synced.whole);
  }
  if (s.method == SyncKind::kDemo) {
    DemoConfig c{.beta = static_cast<float>(s.demo_beta),
                 .k = static_cast<int>(s.demo_k),
                 .max_chunk = static_cast<int>(s.demo_max_chunk),
                 .values = parse_value_format(payload, "sync.payload"),
                 .weight_decay = static_cast<float>(config.train.weight_decay)};
    c.validate();
    return std::make_unique<DemoSync>(c, layout);
  }
  if (s.method == SyncKind::kPowerSgd) {
    PowerSgdConfig c{.rank = static_cast<int>(s.powersgd_rank),
                     .seed = static_cast<uint64_t>(config.run.seed)};
    c.validate();
    return std::make_unique<PowerSgdSync>(c, layout);
  }
  if (s.method == SyncKind::kSignEf) return std::make_unique<SignEfSync>(layout);
  if (s.method == SyncKind::kTopK) {
    const int64_t n = synced.size();
    const int64_t model_params = synced.whole ? synced.whole->total() : n;
    if (s.topk_k > model_params) {
      throw ConfigError(fmt::format("sync.topk_k = {}: must be at most the {} parameters", s.topk_k,
                                    model_params));
    }
    // TopkEf sends ceil(fraction * n) entries; k - 1/2 makes that exactly k. A chunk of a
    // model-parallel replica sends its share, k times its part of the model.
    double fraction = s.topk_k == 0 ? s.topk_fraction
                      : synced.whole
                          ? static_cast<double>(s.topk_k) / static_cast<double>(model_params)
                          : (static_cast<double>(s.topk_k) - 0.5) / static_cast<double>(n);
    TopkEfConfig c{.fraction = fraction, .values = parse_value_format(payload, "sync.payload")};
    c.validate();
    return std::make_unique<TopkEfSync>(c, n);
  }
  throw ConfigError(fmt::format("sync.method = \"{}\": not a replica sync method", s.method));
}

}  // namespace

int64_t gradient_bucket_floats(const ParallelConfig& parallel) {
  return std::max<int64_t>(
      1, static_cast<int64_t>(parallel.bucket_mb * (1 << 20) / static_cast<double>(sizeof(float))));
}

WireDtype gradient_wire(const Config& config) {
  const std::string wire = config.sync.method == SyncKind::kDdp
                               ? resolved_payload(config.sync, config.parallel)
                               : config.parallel.grad_wire;
  return wire == "bf16" ? WireDtype::kBF16 : WireDtype::kF32;
}

std::string resolved_payload(const SyncConfig& sync, const ParallelConfig& parallel) {
  if (sync.payload != "auto") return sync.payload;
  if (sync.method == SyncKind::kDdp) return parallel.grad_wire;
  if (sync.method == SyncKind::kSignEf) return "1bit";
  return "f32";
}

namespace {
std::string describe_outer_payload(const SyncConfig& s, const std::string& payload) {
  if (payload == "dct_topk") {
    return fmt::format("dct top-{} of chunks <= {}, {} values, error-fed{}", s.dct_k, s.dct_chunk,
                       s.dct_values,
                       s.residual_decay < 1.0 ? fmt::format(" (decay {})", s.residual_decay) : "");
  }
  if (payload == "1bit")
    return fmt::format("1-bit all-reduce, blocks of {}, error-fed", s.sign_block);
  if (payload.rfind("powersgd", 0) == 0) {
    return fmt::format("PowerSGD rank {} of the mean{}, error-fed", s.powersgd_rank,
                       payload == "powersgd_bf16" ? " over bf16" : "");
  }
  return payload;
}
}  // namespace

std::string describe_sync(const SyncConfig& s, const ParallelConfig& parallel) {
  const std::string payload = resolved_payload(s, parallel);
  if (s.method == SyncKind::kDiloco) {
    return fmt::format("diloco (H = {}, outer lr {}, momentum {}{}, {} pseudo-gradient{}{})",
                       s.inner_steps, s.outer_lr, s.outer_momentum, s.nesterov ? " Nesterov" : "",
                       describe_outer_payload(s, payload),
                       s.fragments > 1 ? fmt::format(", {} streaming fragments", s.fragments) : "",
                       s.quorum < 1.0 ? fmt::format(", quorum {} within {} s via the store",
                                                    s.quorum, s.outer_deadline_s)
                                      : "");
  }
  if (s.method == SyncKind::kDemo) {
    return fmt::format("demo (beta {}, k {} per chunk of edge <= {}, {} values)", s.demo_beta,
                       s.demo_k, s.demo_max_chunk, payload);
  }
  if (s.method == SyncKind::kPowerSgd) return fmt::format("powersgd (rank {})", s.powersgd_rank);
  if (s.method == SyncKind::kSignEf) return "signef (1 bit per value, error feedback)";
  if (s.method == SyncKind::kTopK) {
    return s.topk_k > 0
               ? fmt::format("topk ({} entries, {} values, error feedback)", s.topk_k, payload)
               : fmt::format("topk (fraction {}, {} values, error feedback)", s.topk_fraction,
                             payload);
  }
  if (s.method == SyncKind::kPs) return "parameter servers";
  return fmt::format("ddp ({} gradients)", payload);
}

nlohmann::json sync_record(const Config& config, int64_t replicas) {
  return {{"method", config.sync.method}, {"replicas", replicas}};
}

void check_sync_record(const nlohmann::json& saved_state, const Config& config, int64_t replicas,
                       const std::string& dir) {
  const auto it = saved_state.find("sync");
  const nlohmann::json saved =
      it != saved_state.end() && it->is_object() ? *it : nlohmann::json::object();
  const auto m = saved.find("method");
  const auto r = saved.find("replicas");
  const std::string method = m != saved.end() && m->is_string() ? m->get<std::string>() : "ddp";
  const int64_t saved_replicas =
      r != saved.end() && r->is_number_integer() ? r->get<int64_t>() : replicas;
  // DDP and parameter servers save the same state (parameters, optimizer state per tensor).
  // The saved name is the file's text, compared as text (an unknown one is simply another method).
  const std::string current(name_of(config.sync.method));
  auto exact = [](const std::string& m) { return m == "ddp" || m == "ps"; };
  if (exact(method) && exact(current)) return;
  if (method == current && saved_replicas == replicas) return;
  throw ConfigError(fmt::format(
      "{} was written with sync.method = \"{}\" on {} replicas; this run has sync.method = "
      "\"{}\" on {}. Low-communication methods keep state per replica, so resume with the same "
      "method and number of replicas, or start a new run from its weights (fresh per-replica "
      "state): --set run.name=NEW --set train.init_from={}",
      dir, method, saved_replicas, config.sync.method, replicas, dir));
}

std::unique_ptr<DpStrategy> make_sync_strategy(const Config& config, Communicator* dp, Model& model,
                                               std::shared_ptr<Store> store,
                                               std::function<void(const std::string&)> log,
                                               int rank, int ranks) {
  if (config.sync.method == SyncKind::kPs) {
    BRIGADE_CHECK(store) << "parameter-server workers need the job's store";
    return std::make_unique<PsWorker>(
        model, optimizer_config(config),
        PsWorkerOptions{.worker = dp ? dp->rank() : rank,
                        .workers = dp ? dp->size() : ranks,
                        .servers = static_cast<int>(config.ps.servers),
                        .consistency = parse_ps_consistency(config.ps.consistency),
                        .timeout = std::chrono::milliseconds(
                            static_cast<int64_t>(config.comm.timeout_s * 1000)),
                        .dynamic = config.ps.assignment == "dynamic",
                        .steps = config.train.steps,
                        .stop_after = config.run.stop_after},
        *store);
  }
  if (config.sync.method == SyncKind::kDdp || !dp || dp->size() == 1) {
    return make_dp_strategy(dp, model, optimizer_config(config),
                            DpOptions{.zero = static_cast<int>(config.parallel.zero),
                                      .bucket_elems = gradient_bucket_floats(config.parallel),
                                      .wire = gradient_wire(config),
                                      .overlap = config.parallel.overlap_grad_reduce});
  }
  return make_replica_sync(config, *dp, SyncedParams::of(model), std::move(store), std::move(log));
}

std::unique_ptr<ReplicaSync> make_replica_sync(const Config& config, Communicator& replicas,
                                               const SyncedParams& synced,
                                               std::shared_ptr<Store> store,
                                               std::function<void(const std::string&)> log) {
  return std::make_unique<ReplicaSync>(
      replicas, synced, optimizer_config(config),
      make_method(config, synced, replicas, std::move(store), std::move(log)));
}

}  // namespace brigade
