#pragma once
// Splitting a data set among federated-learning clients: labels in, per-client index lists
// out, deterministic by seed. The non-IID schemes are those of NIID-Bench (Li et al.,
// "Federated Learning on Non-IID Data Silos: An Experimental Study", ICDE 2022):
//
//   iid        a seeded shuffle cut into N parts whose sizes differ by at most 1.
//   dirichlet  label skew ("noniid-labeldir"): for each class, proportions ~ Dir(alpha) over
//              the clients, and that class's shuffled examples are cut by them. As in
//              NIID-Bench, a client that already holds N_total / N examples gets no share of
//              later classes (keeps sizes bounded), and the whole draw is repeated until every
//              client holds at least min_client_size examples.
//   labels     #C labels per client ("noniid-#label C"): client i holds label i % K and C - 1
//              others drawn without repeats; each label's shuffled examples are cut evenly
//              among the clients holding it. With N < K some labels have no holder: they are
//              reported, and their examples are assigned to nobody. label_sets, when given,
//              names each client's labels instead of drawing them (to reproduce a published
//              draw, such as Flower's NIID-Bench baseline's).
//   quantity   quantity skew ("iid-diff-quantity"): a seeded shuffle cut by sizes ~ Dir(beta),
//              redrawn until every client holds at least min_client_size examples.
//
// Attempt a of a scheme draws from RandomStream(seed, mix_keys(hash_name(scheme), a)), so a
// partition depends only on the labels, the options and the seed. Indices within a client
// are sorted (source order), so a client's file is a subsequence of the source.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace brigade {

enum class PartitionScheme { kIid, kDirichlet, kLabels, kQuantity };

// "iid", "dirichlet", "labels", "quantity".
std::string_view scheme_name(PartitionScheme scheme);

// dirichlet and labels split by label; iid and quantity also split unlabelled data.
bool scheme_needs_labels(PartitionScheme scheme);

// The scheme of that name; ConfigError naming --scheme and the allowed names otherwise.
PartitionScheme parse_scheme(std::string_view name);

inline constexpr int64_t kMaxClients = 10000;

struct PartitionOptions {
  PartitionScheme scheme = PartitionScheme::kIid;
  int64_t clients = 10;           // N, in [1, kMaxClients]
  double alpha = 0.5;             // dirichlet: concentration over clients per class, > 0
  int32_t labels_per_client = 2;  // labels: C, in [1, number of classes]
  // labels: each client's labels instead of a draw (one set per client, distinct labels).
  std::vector<std::vector<int32_t>> label_sets;
  double beta = 0.5;  // quantity: concentration of the client sizes, > 0
  uint64_t seed = 0;
  int64_t min_client_size = 10;  // dirichlet, quantity: redraw until every client has this many
  int64_t max_attempts = 1000;   // ... at most this many draws, then ConfigError

  // ConfigError naming the option (as on the command line), its value and what is allowed,
  // for a data set of `examples` examples in `classes` classes (0: unlabelled, where only iid
  // and quantity apply). Also refuses sizes that cannot work: fewer examples than clients, or
  // than clients * min_client_size for the schemes with a minimum.
  void validate(int64_t examples, int32_t classes) const;
};

struct Partition {
  std::vector<std::vector<int64_t>> clients;  // example indices per client, ascending
  std::vector<int32_t> unheld_labels;         // labels: labels no client holds, ascending
  int64_t attempts = 1;                       // draws made until the minimum size held
};

// Partitions labelled examples (labels[i] in [0, num_classes)) by any scheme. Validates the
// options first (ConfigError as above); ConfigError naming the scheme, the options and the
// attempts when no draw met the minimum size.
Partition partition_examples(std::span<const int32_t> labels, int32_t num_classes,
                             const PartitionOptions& options);

// Partitions `count` unlabelled examples (documents of a text): iid or quantity only;
// ConfigError for the label schemes.
Partition partition_unlabelled(int64_t count, const PartitionOptions& options);

// Examples per class among labels[indices].
std::vector<int64_t> label_histogram(std::span<const int32_t> labels,
                                     std::span<const int64_t> indices, int32_t num_classes);

}  // namespace brigade
