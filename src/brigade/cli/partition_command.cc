// brigade partition: writes one data folder per federated-learning client from a data set,
// deterministic by seed, by the IID and non-IID schemes of data/partition.h, plus
// partition.json (scheme, parameters, seed, source, and per client its count, label
// histogram and the CRC-32C of each file). The whole output folder appears at once
// (base/staged_dir.h). Fashion-MNIST's test split stays out: it belongs to the coordinator.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/base/staged_dir.h"
#include "brigade/cli/commands.h"
#include "brigade/data/client_folders.h"
#include "brigade/data/partition.h"
#include "brigade/data/text_corpus.h"
#include "brigade/monitor/timer.h"

namespace brigade::cli {

namespace {

// Keys in the order written, so partition.json reads from the scheme down to the clients.
using Json = nlohmann::ordered_json;

constexpr const char* kPartitionFile = "partition.json";
constexpr int kPartitionFormat = 1;

struct PartitionArgs {
  std::string data;
  std::string path;
  std::string scheme;
  std::string out;
  int64_t clients = 0;
  double alpha = PartitionOptions{}.alpha;
  int32_t labels_per_client = PartitionOptions{}.labels_per_client;
  std::string label_sets;
  double beta = PartitionOptions{}.beta;
  uint64_t seed = 0;
  double val_fraction = kDefaultValFraction;
  bool force = false;
  // Which scheme-specific options were given, so one given with another scheme is refused.
  CLI::Option* alpha_option = nullptr;
  CLI::Option* labels_option = nullptr;
  CLI::Option* label_sets_option = nullptr;
  CLI::Option* beta_option = nullptr;
  CLI::Option* val_fraction_option = nullptr;
};

// got: what the command line chose instead, e.g. "--scheme = \"iid\"".
void refuse_unless(const CLI::Option* option, bool applies, const std::string& applies_to,
                   const std::string& got) {
  if (option->count() > 0 && !applies) {
    throw ConfigError(
        fmt::format("{} applies to {} only (got {})", option->get_name(), applies_to, got));
  }
}

// "0,7;1,6;2,4": client i's labels are the i-th ';'-separated list. Bounded by what it parses
// into: each entry a label, checked against the classes by PartitionOptions::validate.
std::vector<std::vector<int32_t>> parse_label_sets(const std::string& text) {
  std::vector<std::vector<int32_t>> sets;
  std::stringstream in(text);
  std::string set;
  while (std::getline(in, set, ';')) {
    std::vector<int32_t>& labels = sets.emplace_back();
    std::stringstream items(set);
    std::string item;
    while (std::getline(items, item, ',')) {
      size_t used = 0;
      int label = -1;
      try {
        label = std::stoi(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || item.find_first_not_of(" ", used) != std::string::npos) {
        throw ConfigError(fmt::format(
            "--label-sets: \"{}\" in client {}'s set is not a label (expected e.g. \"0,7;1,6\")",
            item.substr(0, 32), sets.size() - 1));
      }
      labels.push_back(label);
    }
  }
  return sets;
}

PartitionOptions partition_options(const PartitionArgs& args) {
  PartitionOptions o;
  o.scheme = parse_scheme(args.scheme);
  o.clients = args.clients;
  o.alpha = args.alpha;
  o.labels_per_client = args.labels_per_client;
  o.label_sets = parse_label_sets(args.label_sets);
  o.beta = args.beta;
  o.seed = args.seed;
  const std::string got = fmt::format("--scheme = \"{}\"", args.scheme);
  refuse_unless(args.alpha_option, o.scheme == PartitionScheme::kDirichlet, "--scheme dirichlet",
                got);
  refuse_unless(args.labels_option, o.scheme == PartitionScheme::kLabels, "--scheme labels", got);
  refuse_unless(args.label_sets_option, o.scheme == PartitionScheme::kLabels, "--scheme labels",
                got);
  if (args.labels_option->count() > 0 && args.label_sets_option->count() > 0) {
    throw ConfigError(
        "--labels-per-client and --label-sets both choose the labels: give one of them");
  }
  refuse_unless(args.beta_option, o.scheme == PartitionScheme::kQuantity, "--scheme quantity", got);
  return o;
}

Json parameters_json(const PartitionOptions& o) {
  switch (o.scheme) {
    case PartitionScheme::kIid:
      return Json::object();
    case PartitionScheme::kDirichlet:
      return {{"alpha", o.alpha}, {"min_client_size", o.min_client_size}};
    case PartitionScheme::kLabels:
      if (!o.label_sets.empty()) return {{"label_sets", o.label_sets}};
      return {{"labels_per_client", o.labels_per_client}};
    case PartitionScheme::kQuantity:
      return {{"beta", o.beta}, {"min_client_size", o.min_client_size}};
  }
  return Json::object();
}

Json clients_json(const std::vector<ClientRecord>& records) {
  Json clients = Json::array();
  for (const ClientRecord& r : records) {
    Json files = Json::object();
    for (const auto& [name, f] : r.files) files[name] = {{"bytes", f.bytes}, {"crc32c", f.crc32c}};
    Json c = {{"name", r.name}, {"count", r.count}};
    if (!r.label_histogram.empty()) c["label_histogram"] = r.label_histogram;
    c["files"] = std::move(files);
    clients.push_back(std::move(c));
  }
  return clients;
}

// source is written absolute: the coordinator finds the held-out split next to it.
Json common_json(const std::string& data, const std::string& source, const PartitionOptions& o,
                 const Partition& partition) {
  return {{"format", kPartitionFormat},
          {"data", data},
          {"source", std::filesystem::absolute(source).lexically_normal().string()},
          {"scheme", scheme_name(o.scheme)},
          {"parameters", parameters_json(o)},
          {"seed", o.seed},
          {"num_clients", o.clients},
          {"attempts", partition.attempts}};
}

void print_summary(const StagedDir& out, const PartitionOptions& o, const Partition& partition,
                   const char* unit, double seconds) {
  size_t least = partition.clients.front().size(), most = least;
  for (const auto& c : partition.clients) {
    least = std::min(least, c.size());
    most = std::max(most, c.size());
  }
  std::printf("%s: %lld clients, %s, seed %llu: %zu-%zu %s each (%lld draw%s); %.1f s\n",
              out.target().c_str(), static_cast<long long>(o.clients),
              std::string(scheme_name(o.scheme)).c_str(), static_cast<unsigned long long>(o.seed),
              least, most, unit, static_cast<long long>(partition.attempts),
              partition.attempts == 1 ? "" : "s", seconds);
}

// A client folder with no examples would not load (load_fashion_mnist refuses an empty set).
void refuse_empty_clients(const Partition& partition) {
  for (size_t k = 0; k < partition.clients.size(); ++k) {
    if (partition.clients[k].empty()) {
      throw ConfigError(fmt::format(
          "--clients = {}: {} would hold no examples under this scheme; use fewer clients",
          partition.clients.size(), client_folder_name(static_cast<int64_t>(k))));
    }
  }
}

int run_images(const PartitionArgs& args, const PartitionOptions& o) {
  Stopwatch watch;
  const std::string source = args.path.empty() ? kDefaultFashionMnistDir : args.path;
  const LabelledImages data = read_fashion_mnist_train(source);
  const Partition partition = partition_examples(data.labels, data.num_classes, o);
  refuse_empty_clients(partition);
  StagedDir out(args.out, args.force);
  Json j = common_json(args.data, source, o, partition);
  j["split"] = "train";
  j["examples"] = data.labels.size();
  j["num_classes"] = data.num_classes;
  std::vector<int64_t> all(data.labels.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  const std::vector<int64_t> histogram = label_histogram(data.labels, all, data.num_classes);
  j["label_histogram"] = histogram;
  j["unheld_labels"] = partition.unheld_labels;
  j["clients"] = clients_json(write_image_clients(out.staging(), data, partition));
  write_file_durable(out.staging() + "/" + kPartitionFile, j.dump(2) + "\n");
  out.commit();
  if (!partition.unheld_labels.empty()) {
    int64_t left_out = 0;
    std::string names;
    for (int32_t k : partition.unheld_labels) {
      left_out += histogram[static_cast<size_t>(k)];
      names += (names.empty() ? "" : ", ") + std::to_string(k);
    }
    std::printf(
        "%s: no client holds label%s %s (each of %lld clients holds %d of %d labels): their "
        "%lld examples are in no client\n",
        out.target().c_str(), partition.unheld_labels.size() == 1 ? "" : "s", names.c_str(),
        static_cast<long long>(o.clients), o.labels_per_client, data.num_classes,
        static_cast<long long>(left_out));
  }
  print_summary(out, o, partition, "examples", watch.seconds());
  return 0;
}

int run_text(const PartitionArgs& args, const PartitionOptions& o) {
  Stopwatch watch;
  if (args.path.empty()) throw ConfigError("--data text needs --path FILE (a plain-text file)");
  if (!(args.val_fraction >= 0.0 && args.val_fraction < 1.0)) {
    throw ConfigError(fmt::format("--val-fraction = {}: must be in [0, 1)", args.val_fraction));
  }
  // The documents load_text_file puts in the train split; its validation documents stay out
  // of every client, as Fashion-MNIST's test split does.
  const std::vector<std::string> all = parse_paragraphs(read_file(args.path, kMaxDataFileBytes));
  const std::string name = std::filesystem::path(args.path).filename().string();
  std::vector<std::string> docs, validation;
  for (size_t k = 0; k < all.size(); ++k) {
    const bool held_out = is_validation_doc(name, static_cast<int64_t>(k), args.val_fraction);
    (held_out ? validation : docs).push_back(all[k]);
  }
  const Partition partition = partition_unlabelled(static_cast<int64_t>(docs.size()), o);
  refuse_empty_clients(partition);
  StagedDir out(args.out, args.force);
  Json j = common_json(args.data, args.path, o, partition);
  j["val_fraction"] = args.val_fraction;
  j["documents"] = docs.size();
  j["validation_documents"] = validation.size();
  j["clients"] = clients_json(write_text_clients(out.staging(), docs, partition));
  if (!validation.empty()) {
    // The coordinator's test set (fed.test_data), as Fashion-MNIST's t10k split is for images.
    const WrittenFile f = write_validation_text(out.staging(), validation);
    j["validation"] = {{"file", kValidationTextFile}, {"bytes", f.bytes}, {"crc32c", f.crc32c}};
  }
  write_file_durable(out.staging() + "/" + kPartitionFile, j.dump(2) + "\n");
  out.commit();
  print_summary(out, o, partition, "documents", watch.seconds());
  return 0;
}

int run_partition(const PartitionArgs& args) {
  const PartitionOptions o = partition_options(args);
  const bool text = args.data == "text";
  refuse_unless(args.val_fraction_option, text, "--data text",
                fmt::format("--data = \"{}\"", args.data));
  if (text && scheme_needs_labels(o.scheme)) {
    throw ConfigError(fmt::format(
        "--scheme = \"{}\" needs labelled examples; --data text allows \"iid\" or \"quantity\"",
        args.scheme));
  }
  // Refused before any data is read: the common mistake costs nothing.
  if (!args.force && std::filesystem::exists(std::filesystem::path(args.out))) {
    throw ConfigError(
        fmt::format("--out = \"{}\" already exists; choose another folder or pass "
                    "--force to replace it",
                    args.out));
  }
  return text ? run_text(args, o) : run_images(args, o);
}

}  // namespace

Command add_partition(CLI::App& app) {
  auto args = std::make_shared<PartitionArgs>();
  auto* sub = app.add_subcommand("partition",
                                 "split a data set into per-client folders for federated learning");
  sub->add_option("--data", args->data, "fashion_mnist | text")
      ->required()
      ->check(CLI::IsMember({"fashion_mnist", "text"}));
  sub->add_option(
      "--path", args->path,
      fmt::format("data folder (fashion_mnist, default {}) or text file", kDefaultFashionMnistDir));
  sub->add_option("--clients", args->clients, "number of clients, 1-10000")->required();
  sub->add_option("--scheme", args->scheme, "iid | dirichlet | labels | quantity")->required();
  args->alpha_option = sub->add_option("--alpha", args->alpha,
                                       "dirichlet: concentration per class over clients (> 0)");
  args->labels_option = sub->add_option("--labels-per-client", args->labels_per_client,
                                        "labels: distinct labels per client (1..classes)");
  args->label_sets_option = sub->add_option(
      "--label-sets", args->label_sets,
      "labels: each client's labels, e.g. \"0,7;1,6;...\" (one set per client), instead of a draw");
  args->beta_option =
      sub->add_option("--beta", args->beta, "quantity: concentration of client sizes (> 0)");
  sub->add_option("--seed", args->seed, "random seed (default 0)");
  args->val_fraction_option =
      sub->add_option("--val-fraction", args->val_fraction,
                      "text: share of documents kept out for validation, as training splits them");
  sub->add_option("--out", args->out, "output folder (must not exist)")->required();
  sub->add_flag("--force", args->force, "replace an existing output folder");
  return [args]() { return run_partition(*args); };
}

}  // namespace brigade::cli
