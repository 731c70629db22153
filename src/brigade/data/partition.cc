#include "brigade/data/partition.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/data/random_stream.h"
#include "brigade/tensor/rng.h"

namespace brigade {

namespace {

RandomStream attempt_stream(const PartitionOptions& options, int64_t attempt) {
  const uint64_t key =
      mix_keys(hash_name(scheme_name(options.scheme)), static_cast<uint64_t>(attempt));
  return RandomStream(options.seed, key);
}

bool has_min_size(PartitionScheme scheme) {
  return scheme == PartitionScheme::kDirichlet || scheme == PartitionScheme::kQuantity;
}

void check_concentration(const char* option, double value) {
  if (!(value > 0.0 && std::isfinite(value))) {
    throw ConfigError(fmt::format("{} = {}: must be a finite number > 0", option, value));
  }
}

std::vector<int64_t> iota_indices(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

// Appends values to the given targets in order, cut into near-equal parts (the first
// size % parts targets get one more), as numpy.array_split cuts.
void append_even_parts(std::span<const int64_t> values, std::span<std::vector<int64_t>* const> to) {
  const size_t parts = to.size();
  const size_t base = values.size() / parts, extra = values.size() % parts;
  size_t begin = 0;
  for (size_t j = 0; j < parts; ++j) {
    const size_t size = base + (j < extra ? 1 : 0);
    to[j]->insert(to[j]->end(), values.begin() + begin, values.begin() + begin + size);
    begin += size;
  }
}

// Appends values to clients cut at floor(cumsum(p) * size), as NIID-Bench cuts; p sums to 1.
void append_proportional_parts(std::span<const int64_t> values, const std::vector<double>& p,
                               std::vector<std::vector<int64_t>>& clients) {
  const int64_t size = static_cast<int64_t>(values.size());
  double cumulative = 0.0;
  int64_t begin = 0;
  for (size_t j = 0; j < clients.size(); ++j) {
    int64_t end = size;
    if (j + 1 < clients.size()) {
      cumulative += p[j];
      end = std::clamp(static_cast<int64_t>(cumulative * static_cast<double>(size)), begin, size);
    }
    clients[j].insert(clients[j].end(), values.begin() + begin, values.begin() + end);
    begin = end;
  }
}

int64_t smallest(const std::vector<std::vector<int64_t>>& clients) {
  size_t least = clients.front().size();
  for (const auto& c : clients) least = std::min(least, c.size());
  return static_cast<int64_t>(least);
}

Partition finish(std::vector<std::vector<int64_t>> clients, int64_t attempts) {
  for (auto& c : clients) std::sort(c.begin(), c.end());
  Partition out;
  out.clients = std::move(clients);
  out.attempts = attempts;
  return out;
}

[[noreturn]] void throw_no_draw(const PartitionOptions& options, const char* option, double value) {
  throw ConfigError(fmt::format(
      "--scheme {} with {} = {} and --clients = {}: none of {} draws gave every client at "
      "least {} examples; raise {} or lower --clients",
      scheme_name(options.scheme), option, value, options.clients, options.max_attempts,
      options.min_client_size, option));
}

Partition partition_iid(int64_t count, const PartitionOptions& options) {
  RandomStream rng = attempt_stream(options, 0);
  std::vector<int64_t> order = iota_indices(count);
  shuffle(order, rng);
  std::vector<std::vector<int64_t>> clients(static_cast<size_t>(options.clients));
  std::vector<std::vector<int64_t>*> targets;
  for (auto& c : clients) targets.push_back(&c);
  append_even_parts(order, targets);
  return finish(std::move(clients), 1);
}

Partition partition_quantity(int64_t count, const PartitionOptions& options) {
  for (int64_t attempt = 0; attempt < options.max_attempts; ++attempt) {
    RandomStream rng = attempt_stream(options, attempt);
    const std::vector<double> p = sample_dirichlet(rng, options.beta, options.clients);
    std::vector<int64_t> order = iota_indices(count);
    shuffle(order, rng);
    std::vector<std::vector<int64_t>> clients(static_cast<size_t>(options.clients));
    append_proportional_parts(order, p, clients);
    if (smallest(clients) >= options.min_client_size) {
      return finish(std::move(clients), attempt + 1);
    }
  }
  throw_no_draw(options, "--beta", options.beta);
}

std::vector<std::vector<int64_t>> indices_by_class(std::span<const int32_t> labels,
                                                   int32_t num_classes) {
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < labels.size(); ++i) {
    BRIGADE_CHECK(labels[i] >= 0 && labels[i] < num_classes)
        << "label " << labels[i] << " at " << i << " outside [0, " << num_classes << ")";
    by_class[static_cast<size_t>(labels[i])].push_back(static_cast<int64_t>(i));
  }
  return by_class;
}

Partition partition_dirichlet(std::span<const int32_t> labels, int32_t num_classes,
                              const PartitionOptions& options) {
  const auto by_class = indices_by_class(labels, num_classes);
  // NIID-Bench's balance: a client at or above an equal share takes no more classes.
  const double equal_share =
      static_cast<double>(labels.size()) / static_cast<double>(options.clients);
  for (int64_t attempt = 0; attempt < options.max_attempts; ++attempt) {
    RandomStream rng = attempt_stream(options, attempt);
    std::vector<std::vector<int64_t>> clients(static_cast<size_t>(options.clients));
    bool cut_every_class = true;
    for (const std::vector<int64_t>& members : by_class) {
      std::vector<int64_t> shuffled = members;
      shuffle(shuffled, rng);
      std::vector<double> p = sample_dirichlet(rng, options.alpha, options.clients);
      double sum = 0.0;
      for (size_t j = 0; j < p.size(); ++j) {
        if (static_cast<double>(clients[j].size()) >= equal_share) p[j] = 0.0;
        sum += p[j];
      }
      // Every client still open drew a share that underflowed: this draw cannot place the
      // class (NIID-Bench would divide by zero), so it counts as a failed attempt.
      if (!(sum > 0.0)) {
        cut_every_class = false;
        break;
      }
      for (double& x : p) x /= sum;
      append_proportional_parts(shuffled, p, clients);
    }
    if (cut_every_class && smallest(clients) >= options.min_client_size) {
      return finish(std::move(clients), attempt + 1);
    }
  }
  throw_no_draw(options, "--alpha", options.alpha);
}

// --label-sets: one set per client, each of distinct labels that exist.
void check_label_sets(const std::vector<std::vector<int32_t>>& sets, int64_t clients,
                      int32_t classes) {
  if (sets.empty()) return;
  if (static_cast<int64_t>(sets.size()) != clients) {
    throw ConfigError(fmt::format("--label-sets: {} sets for --clients = {} (one per client)",
                                  sets.size(), clients));
  }
  for (size_t i = 0; i < sets.size(); ++i) {
    std::vector<int32_t> held = sets[i];
    std::sort(held.begin(), held.end());
    const bool in_range = !held.empty() && held.front() >= 0 && held.back() < classes;
    if (!in_range || std::adjacent_find(held.begin(), held.end()) != held.end()) {
      throw ConfigError(fmt::format(
          "--label-sets: client {} holds [{}]: each client needs distinct labels in [0, {}]", i,
          fmt::join(sets[i], ", "), classes - 1));
    }
  }
}

Partition partition_labels(std::span<const int32_t> labels, int32_t num_classes,
                           const PartitionOptions& options) {
  const auto by_class = indices_by_class(labels, num_classes);
  RandomStream rng = attempt_stream(options, 0);
  std::vector<std::vector<int64_t>> clients(static_cast<size_t>(options.clients));
  std::vector<std::vector<std::vector<int64_t>*>> holders(static_cast<size_t>(num_classes));
  for (int64_t i = 0; i < options.clients; ++i) {
    const int32_t first = static_cast<int32_t>(i % num_classes);
    std::vector<int32_t> others;
    for (int32_t k = 0; k < num_classes; ++k) {
      if (k != first) others.push_back(k);
    }
    // A partial Fisher-Yates draws the other C - 1 labels without repeats.
    std::vector<int32_t> held = {first};
    if (!options.label_sets.empty()) {
      held = options.label_sets[static_cast<size_t>(i)];
    } else {
      for (size_t t = 0; t + 1 < static_cast<size_t>(options.labels_per_client); ++t) {
        const size_t j = t + static_cast<size_t>(rng.next_below(others.size() - t));
        std::swap(others[t], others[j]);
        held.push_back(others[t]);
      }
    }
    std::sort(held.begin(), held.end());
    for (int32_t k : held) holders[static_cast<size_t>(k)].push_back(&clients[i]);
  }
  std::vector<int32_t> unheld;
  for (int32_t k = 0; k < num_classes; ++k) {
    if (holders[k].empty()) {
      unheld.push_back(k);
      continue;
    }
    std::vector<int64_t> shuffled = by_class[k];
    shuffle(shuffled, rng);
    append_even_parts(shuffled, holders[k]);
  }
  Partition out = finish(std::move(clients), 1);
  out.unheld_labels = std::move(unheld);
  return out;
}

}  // namespace

std::string_view scheme_name(PartitionScheme scheme) {
  switch (scheme) {
    case PartitionScheme::kIid:
      return "iid";
    case PartitionScheme::kDirichlet:
      return "dirichlet";
    case PartitionScheme::kLabels:
      return "labels";
    case PartitionScheme::kQuantity:
      return "quantity";
  }
  return "?";
}

bool scheme_needs_labels(PartitionScheme scheme) {
  return scheme == PartitionScheme::kDirichlet || scheme == PartitionScheme::kLabels;
}

PartitionScheme parse_scheme(std::string_view name) {
  for (auto scheme : {PartitionScheme::kIid, PartitionScheme::kDirichlet, PartitionScheme::kLabels,
                      PartitionScheme::kQuantity}) {
    if (scheme_name(scheme) == name) return scheme;
  }
  throw ConfigError(fmt::format(
      "--scheme = \"{}\": allowed values are \"iid\", \"dirichlet\", \"labels\", \"quantity\"",
      name));
}

void PartitionOptions::validate(int64_t examples, int32_t classes) const {
  BRIGADE_CHECK(max_attempts >= 1 && min_client_size >= 0)
      << "max_attempts " << max_attempts << ", min_client_size " << min_client_size;
  if (clients < 1 || clients > kMaxClients) {
    throw ConfigError(fmt::format("--clients = {}: must be in [1, {}]", clients, kMaxClients));
  }
  check_concentration("--alpha", alpha);
  check_concentration("--beta", beta);
  if (scheme_needs_labels(scheme) && classes == 0) {
    throw ConfigError(fmt::format(
        "--scheme = \"{}\" needs labelled examples; unlabelled data (text) allows \"iid\" "
        "or \"quantity\"",
        scheme_name(scheme)));
  }
  if (scheme == PartitionScheme::kLabels &&
      (labels_per_client < 1 || labels_per_client > classes)) {
    throw ConfigError(fmt::format("--labels-per-client = {}: must be in [1, {}] (the classes)",
                                  labels_per_client, classes));
  }
  check_label_sets(label_sets, clients, classes);
  if (examples < clients) {
    throw ConfigError(fmt::format(
        "--clients = {}: the data holds {} examples, and every client needs at least one", clients,
        examples));
  }
  if (has_min_size(scheme) && examples < clients * min_client_size) {
    throw ConfigError(fmt::format(
        "--clients = {} with --scheme = \"{}\": every client needs at least {} examples ({} in "
        "all), the data holds {}",
        clients, scheme_name(scheme), min_client_size, clients * min_client_size, examples));
  }
}

Partition partition_examples(std::span<const int32_t> labels, int32_t num_classes,
                             const PartitionOptions& options) {
  BRIGADE_CHECK(num_classes >= 1) << "labelled data with " << num_classes << " classes";
  const int64_t count = static_cast<int64_t>(labels.size());
  options.validate(count, num_classes);
  switch (options.scheme) {
    case PartitionScheme::kIid:
      return partition_iid(count, options);
    case PartitionScheme::kDirichlet:
      return partition_dirichlet(labels, num_classes, options);
    case PartitionScheme::kLabels:
      return partition_labels(labels, num_classes, options);
    case PartitionScheme::kQuantity:
      return partition_quantity(count, options);
  }
  BRIGADE_CHECK(false) << "unknown scheme";
  return {};
}

Partition partition_unlabelled(int64_t count, const PartitionOptions& options) {
  options.validate(count, 0);
  return options.scheme == PartitionScheme::kIid ? partition_iid(count, options)
                                                 : partition_quantity(count, options);
}

std::vector<int64_t> label_histogram(std::span<const int32_t> labels,
                                     std::span<const int64_t> indices, int32_t num_classes) {
  std::vector<int64_t> histogram(static_cast<size_t>(num_classes), 0);
  for (int64_t i : indices) ++histogram[static_cast<size_t>(labels[static_cast<size_t>(i)])];
  return histogram;
}

}  // namespace brigade
