#include "brigade/plan/layout_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>

#include "brigade/base/error.h"

namespace brigade {

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

std::string gib(double bytes) {
  return fmt::format("{:.2f} GiB", bytes / (1 << 30));
}

using NamedPart = std::pair<const char*, double>;

// The part with the largest value.
NamedPart largest(std::initializer_list<NamedPart> parts) {
  return *std::max_element(parts.begin(), parts.end(), [](const NamedPart& a, const NamedPart& b) {
    return a.second < b.second;
  });
}

// The largest memory category, for "does not fit" reasons.
std::string largest_part(const MemoryPrediction& m) {
  const auto [name, bytes] = largest({{"weights", m.weights},
                                      {"gradients", m.gradients},
                                      {"optimizer state", m.optimizer},
                                      {"activations", m.activations},
                                      {"buffers", m.buffers},
                                      {"process", m.overhead}});
  return fmt::format("{} {}", name, gib(bytes));
}

// Why `c` is slower than `best`: the part of the step that grew the most.
std::string slower_because(const TimePrediction& c, const TimePrediction& best) {
  if (c.step < best.step * 1.005) return "as fast as the best, with more memory";
  const auto [name, seconds] = largest({{"compute", c.compute - best.compute},
                                        {"tensor-parallel all-reduces", c.tp_comm - best.tp_comm},
                                        {"pipeline bubble", c.bubble - best.bubble},
                                        {"exposed dp exchange", c.dp_exposed - best.dp_exposed},
                                        {"optimizer", c.optimizer - best.optimizer}});
  return fmt::format("{:+.0f}% step time: {} {:+.1f} ms", 100 * (c.step / best.step - 1), name,
                     1e3 * seconds);
}

// The first line of an error, shortened: refusals are counted by it.
std::string reason_of(const std::string& what) {
  std::string line = what.substr(0, what.find('\n'));
  // A layout refusal starts with the layout and its micro-batches; what groups refusals is the
  // reason after, with its numbers (which differ between candidates) written as N.
  if (line.rfind("[parallel] layout", 0) == 0) {
    const size_t at = line.find("): ");
    if (at != std::string::npos) line = line.substr(at + 3);
  }
  std::string out;
  for (size_t i = 0; i < line.size() && out.size() < 110; ++i) {
    const bool number_starts = std::isdigit(static_cast<unsigned char>(line[i])) &&
                               (i == 0 || !std::isalnum(static_cast<unsigned char>(line[i - 1])));
    if (number_starts) {
      while (i + 1 < line.size() && std::isdigit(static_cast<unsigned char>(line[i + 1]))) ++i;
      out += 'N';
    } else {
      out += line[i];
    }
  }
  return out;
}

// The examples per step of the config on this world (its replicas when its layout fits it).
int64_t config_global_batch(const Config& base, int64_t world) {
  int64_t replicas = 1;
  try {
    const JobPlan p = plan_job(base, world);
    replicas = static_cast<int64_t>(p.mesh.shape.dp) * p.mesh.shape.ep;
  } catch (const ConfigError&) {
  }
  return base.train.micro_batch * base.train.grad_accum * replicas;
}

}  // namespace

std::string Candidate::label() const {
  const MeshShape& s = plan.mesh.shape;
  std::string schedule = config.parallel.schedule;
  if (plan.mesh.virtual_stages > 1) schedule += fmt::format(" v={}", plan.mesh.virtual_stages);
  std::string sync(name_of(config.sync.method));
  if (config.sync.method == SyncKind::kDiloco)
    sync += fmt::format(" H={}", config.sync.inner_steps);
  return fmt::format("pp={} dp={} ep={} tp={} zero={} {} B={} m={} recompute={} {}", s.pp, s.dp,
                     s.ep, s.tp, config.parallel.zero, schedule, config.train.micro_batch,
                     config.train.grad_accum, config.train.recompute, sync);
}

SearchResult search_layouts(const Config& base, const ClusterSpec& cluster,
                            const SearchOptions& options) {
  if (base.model.kind != ModelKind::kGpt) {
    throw ConfigError(
        fmt::format("model.kind = \"{}\": brigade plan predicts GPT models", base.model.kind));
  }
  const int64_t world = cluster.world();
  SearchResult result;
  result.global_batch =
      options.global_batch > 0 ? options.global_batch : config_global_batch(base, world);
  std::vector<Config> configs;
  if (options.as_is) {
    configs.push_back(base);
  } else {
    const int64_t G = result.global_batch;
    for (int64_t tp : divisors(world)) {
      if (tp > cluster.processes_per_node) continue;  // tp's all-reduces stay inside a node
      for (int64_t pp : divisors(world / tp)) {
        if (pp > base.model.n_layer) continue;
        for (int64_t ep : divisors(world / tp / pp)) {
          if (ep > 1 && (base.model.n_experts == 0 || base.model.n_experts % ep != 0)) continue;
          const int64_t dp = world / tp / pp / ep;
          const int64_t replicas = dp * ep;
          if (G % replicas != 0) continue;
          for (int64_t B : divisors(G / replicas)) {
            const int64_t m = G / replicas / B;
            std::vector<std::pair<std::string, int64_t>> schedules = {{"1f1b", 1}};
            if (pp > 1) {
              schedules.push_back({"zb-h1", 1});
              schedules.push_back({"interleaved", 2});
            }
            for (const auto& [schedule, v] : schedules) {
              for (int64_t zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
                for (RecomputeMode recompute : {RecomputeMode::kNone, RecomputeMode::kBlock}) {
                  std::vector<int64_t> hs = {0};
                  if (replicas > 1) {
                    hs.insert(hs.end(), options.diloco_inner_steps.begin(),
                              options.diloco_inner_steps.end());
                  }
                  for (int64_t h : hs) {
                    Config c = base;
                    c.parallel.tp = tp;
                    c.parallel.pp = pp;
                    c.parallel.ep = ep;
                    c.parallel.dp = 0;
                    c.parallel.zero = zero;
                    c.parallel.schedule = schedule;
                    c.parallel.virtual_stages = v;
                    c.parallel.layer_split = {};
                    c.parallel.sequence_parallel = false;
                    c.train.micro_batch = B;
                    c.train.grad_accum = m;
                    c.train.recompute = recompute;
                    c.sync = SyncConfig{};
                    if (h > 0) {
                      c.sync.method = SyncKind::kDiloco;
                      c.sync.inner_steps = h;
                    }
                    configs.push_back(std::move(c));
                  }
                }
              }
            }
          }
        }
      }
    }
    if (configs.empty()) {
      throw ConfigError(fmt::format(
          "no layout of {} processes can share a global batch of {} examples between its "
          "replicas; pass --global-batch with more divisors",
          world, G));
    }
  }
  const double limit = cluster.memory_bytes_per_process();
  for (Config& c : configs) {
    Candidate cand;
    try {
      c.validate();
      cand.plan = plan_job(c, world);
      cand.prediction = predict(c, cand.plan, cluster);
    } catch (const ConfigError& e) {
      if (options.as_is) throw;
      ++result.refused;
      ++result.refusals[reason_of(e.what())];
      continue;
    }
    cand.fits = cand.prediction.memory.total() <= limit;
    cand.config = std::move(c);
    result.ranked.push_back(std::move(cand));
  }
  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const Candidate& a, const Candidate& b) {
                     if (a.fits != b.fits) return a.fits;
                     // Step times in the same 0.5% band: the one that needs less memory first.
                     const auto band = [](const Candidate& c) {
                       return std::floor(std::log(c.prediction.time.step) / std::log(1.005));
                     };
                     if (a.fits && band(a) != band(b)) return band(a) < band(b);
                     return a.prediction.memory.total() < b.prediction.memory.total();
                   });
  const Candidate* best =
      result.ranked.empty() || !result.ranked.front().fits ? nullptr : &result.ranked.front();
  for (Candidate& c : result.ranked) {
    if (&c == best) continue;
    if (!c.fits) {
      c.why_not = fmt::format("does not fit: {} > {} per process (largest: {})",
                              gib(c.prediction.memory.total()), gib(limit),
                              largest_part(c.prediction.memory));
    } else if (best != nullptr) {
      c.why_not = slower_because(c.prediction.time, best->prediction.time);
    }
  }
  return result;
}

}  // namespace brigade
