#include "brigade/fed/coordinator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "brigade/base/error.h"
#include "brigade/base/stop_after.h"
#include "brigade/fed/local_training.h"
#include "brigade/fed/state_file.h"
#include "brigade/fed/update_check.h"
#include "brigade/optim/robust_aggregate.h"

namespace brigade {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

ServerOptimizerConfig server_optimizer_config(const FedConfig& fed) {
  return {.name = fed.server_optimizer,
          .lr = static_cast<float>(fed.server_lr),
          .momentum = static_cast<float>(fed.server_momentum),
          .beta1 = static_cast<float>(fed.server_beta1),
          .beta2 = static_cast<float>(fed.server_beta2),
          .tau = static_cast<float>(fed.server_tau)};
}

}  // namespace

Coordinator::Coordinator(const CoordinatorSetup& setup, Model& eval_model, const Dataset& test,
                         CurveServerSocket& socket, std::function<void()> refresh_keys,
                         MetricsWriter& metrics, Log& log)
    : setup_(setup),
      model_(eval_model),
      test_(test, eval_model.max_batch(), setup.eval_batches),
      socket_(socket),
      refresh_keys_(std::move(refresh_keys)),
      metrics_(metrics),
      log_(log),
      n_(eval_model.num_params()),
      scaffold_(setup.fed.strategy == "scaffold") {
  if (scaffold_) control_.assign(static_cast<size_t>(n_), 0.0f);
  aggregated_.assign(static_cast<size_t>(setup_.clients), -1);
  delta_.assign(static_cast<size_t>(n_), 0.0f);
  server_ = std::make_unique<ServerOptimizer>(server_optimizer_config(setup_.fed), n_);
  eval_batch_ = test_.make_batch();
}

void Coordinator::load_or_initialize() {
  const std::string& path = setup_.state_path;
  const bool dp = setup_.fed.dp_clip > 0;
  if (!setup_.resume || !std::filesystem::exists(path)) {
    model_.initialize(setup_.seed);
    next_round_ = 0;
    if (dp) {
      dp_key_ = make_dp_key();
      dp_ = std::make_unique<DpMechanism>(setup_.fed.dp_clip, setup_.fed.dp_noise, dp_key_);
    }
    return;
  }
  const StateFile state = read_state_file(path);
  const std::vector<float>& params = state.tensor("params", n_, path);
  std::memcpy(model_.params(), params.data(), sizeof(float) * n_);
  if (scaffold_) control_ = state.tensor("control", n_, path);
  for (int k = 0; k < setup_.clients; ++k) {
    aggregated_[static_cast<size_t>(k)] = state.int_or(fmt::format("aggregated_{}", k), -1);
  }
  for (auto& [name, buffer] : server_->state()) *buffer = state.tensor(name, n_, path);
  next_round_ = state.int_or("next_round", 0);
  if (next_round_ < 0 || next_round_ > setup_.fed.rounds) {
    throw CheckpointError(fmt::format("{}: next round {} outside [0, fed.rounds = {}]", path,
                                      next_round_, setup_.fed.rounds));
  }
  if (dp) {
    for (size_t w = 0; w < dp_key_.size() / 8; ++w) {
      const std::string name = fmt::format("dp_key_{}", w);
      if (!state.ints.count(name)) {
        throw CheckpointError(fmt::format(
            "{}: no DP key (the state was saved without fed.dp_clip; a private run cannot "
            "resume a non-private one)",
            path));
      }
      const int64_t word = state.ints.at(name);
      std::memcpy(dp_key_.data() + 8 * w, &word, 8);
    }
    dp_ = std::make_unique<DpMechanism>(setup_.fed.dp_clip, setup_.fed.dp_noise, dp_key_);
    accountant_.compose(dp_sampling_probability(), setup_.fed.dp_noise, next_round_);
  }
  log_.info("resuming the federation from {} at round {}", path, next_round_);
}

void Coordinator::save(int64_t next_round) {
  StateFile state;
  state.ints["next_round"] = next_round;
  state.ints["clients"] = setup_.clients;
  state.tensors["params"].assign(model_.params(), model_.params() + n_);
  if (scaffold_) state.tensors["control"] = control_;
  for (int k = 0; k < setup_.clients; ++k) {
    const int64_t round = aggregated_[static_cast<size_t>(k)];
    if (round >= 0) state.ints[fmt::format("aggregated_{}", k)] = round;
  }
  for (auto& [name, buffer] : server_->state()) state.tensors[name] = *buffer;
  if (dp_) {
    for (size_t w = 0; w < dp_key_.size() / 8; ++w) {
      int64_t word = 0;
      std::memcpy(&word, dp_key_.data() + 8 * w, 8);
      state.ints[fmt::format("dp_key_{}", w)] = word;
    }
  }
  write_state_file(setup_.state_path, state);
}

void Coordinator::refuse(int peer, const std::string& why) {
  ++refused_;
  log_.info("refused a message from client {}: {}", peer, why);
}

std::optional<Coordinator::Incoming> Coordinator::decode_received(CurveServerSocket::Received&& r) {
  if (r.peer < 0) return std::nullopt;  // ZAP names every admitted connection
  connected_[r.peer] = zmq::message_t(r.identity.data(), r.identity.size());
  const int64_t bytes = fed_message_bytes(r.frames);
  std::string why;
  std::optional<FedMessage> m = decode_fed_message(std::move(r.frames), setup_.run_tag, n_, &why);
  if (!m) {
    refuse(r.peer, why);
    return std::nullopt;
  }
  return Incoming{.peer = r.peer, .bytes = bytes, .message = std::move(*m)};
}

std::optional<Coordinator::Incoming> Coordinator::receive_before(Clock::time_point deadline,
                                                                 int* refused_peer) {
  if (refused_peer != nullptr) *refused_peer = -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  std::optional<CurveServerSocket::Received> r =
      socket_.receive(std::min(left, std::chrono::milliseconds(500)));
  if (!r) return std::nullopt;
  const int peer = r->peer;
  std::optional<Incoming> in = decode_received(std::move(*r));
  if (!in && refused_peer != nullptr) *refused_peer = peer;
  if (!in || static_cast<FedType>(in->message.header.type) == FedType::kHello) return std::nullopt;
  return in;
}

void Coordinator::note(CurveServerSocket::Received&& r) {
  std::optional<Incoming> in = decode_received(std::move(r));
  if (in && static_cast<FedType>(in->message.header.type) == FedType::kUpdate) {
    refuse(in->peer, fmt::format("an answer to round {} attempt {}, which is over",
                                 in->message.header.round + 1, in->message.header.attempt + 1));
  }
}

void Coordinator::wait_for_clients(int64_t want) {
  const auto deadline = Clock::now() + setup_.join_timeout;
  auto next_refresh = Clock::now();
  while (static_cast<int64_t>(connected_.size()) < want && Clock::now() < deadline &&
         !setup_.stop_requested()) {
    if (Clock::now() >= next_refresh) {
      refresh_keys_();
      next_refresh = Clock::now() + std::chrono::milliseconds(500);
    }
    if (auto r = socket_.receive(std::chrono::milliseconds(100))) note(std::move(*r));
  }
}

std::vector<int> Coordinator::sample(int64_t round, int64_t attempt) const {
  std::vector<int> ids;
  for (const auto& [client, identity] : connected_) ids.push_back(client);
  if (dp_) {  // Poisson sampling, secret: the accountant's amplification assumes both
    std::vector<int> chosen;
    const double q = dp_sampling_probability();
    for (int client : ids) {
      if (dp_->sampled(client, round, attempt, q)) chosen.push_back(client);
    }
    return chosen;
  }
  const int64_t want = setup_.fed.clients_per_round;
  if (want == 0 || want >= static_cast<int64_t>(ids.size())) return ids;
  // A partial Fisher-Yates over the sorted ids, seeded by (seed, round, attempt).
  std::vector<int64_t> order;
  seeded_permutation(
      mix_seed(setup_.seed, 0xfed, static_cast<uint64_t>(round), static_cast<uint64_t>(attempt)),
      order, static_cast<int64_t>(ids.size()));
  std::vector<int> chosen;
  for (int64_t i = 0; i < want; ++i) chosen.push_back(ids[static_cast<size_t>(order[i])]);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

std::set<int> Coordinator::send_train(int64_t round, int64_t attempt, const std::vector<int>& asked,
                                      int64_t threshold, int64_t* bytes_down) {
  std::set<int> reached;
  for (int client : asked) {
    FedHeader h;
    h.type = static_cast<uint32_t>(FedType::kTrain);
    h.client = static_cast<uint32_t>(client);
    h.run_tag = setup_.run_tag;
    h.round = round;
    h.attempt = attempt;
    h.count = n_;
    h.controls = scaffold_ ? 1 : 0;
    h.threshold = threshold;
    h.aggregated = aggregated_[static_cast<size_t>(client)];
    zmq::multipart_t frames =
        encode_fed_message(h, model_.params(), scaffold_ ? control_.data() : nullptr);
    const int64_t bytes = fed_message_bytes(frames);
    if (!socket_.send(connected_.at(client), std::move(frames))) {
      log_.info("client {} has disconnected; it leaves the federation until it connects again",
                client);
      connected_.erase(client);
      continue;
    }
    *bytes_down += bytes;
    reached.insert(client);
  }
  return reached;
}

std::map<int, Coordinator::Answer> Coordinator::collect(int64_t round, int64_t attempt,
                                                        const std::vector<int>& asked,
                                                        int64_t* bytes_down, int64_t* bytes_up) {
  RoundInProgress progress;
  progress.round = round;
  progress.attempt = attempt;
  progress.values = n_;
  progress.scaffold = scaffold_;
  const auto start = Clock::now();
  progress.asked = send_train(round, attempt, asked, 0, bytes_down);
  std::map<int, Answer> answers;
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(setup_.fed.round_deadline_s));
  std::set<int> failed;  // asked clients whose answer was refused: they send no other
  while (progress.answered.size() + failed.size() < progress.asked.size() &&
         Clock::now() < deadline && !setup_.stop_requested()) {
    int malformed_from = -1;
    std::optional<Incoming> in = receive_before(deadline, &malformed_from);
    if (!in) {
      // A malformed message from a client asked and not yet answered is its answer, refused
      // (a diverged client's non-finite loss): the round need not wait for another.
      if (progress.asked.count(malformed_from) && !progress.answered.count(malformed_from)) {
        failed.insert(malformed_from);
      }
      continue;
    }
    const int peer = in->peer;
    FedMessage& m = in->message;
    const std::string why = update_refusal(m, peer, progress);
    if (!why.empty()) {
      refuse(peer, why);
      const FedHeader& h = m.header;
      if (h.round == round && h.attempt == attempt && progress.asked.count(peer) &&
          !progress.answered.count(peer)) {
        failed.insert(peer);
      }
      continue;
    }
    progress.answered.insert(peer);
    *bytes_up += in->bytes;
    answers.emplace(peer, Answer{.message = std::move(m), .seconds = seconds_since(start)});
  }
  return answers;
}

double Coordinator::dp_sampling_probability() const {
  const int64_t per_round = setup_.fed.clients_per_round;
  if (per_round == 0 || per_round >= setup_.clients) return 1.0;
  return static_cast<double>(per_round) / static_cast<double>(setup_.clients);
}

void Coordinator::record_privacy(nlohmann::json& record) {
  accountant_.compose(dp_sampling_probability(), setup_.fed.dp_noise);
  const double eps = accountant_.epsilon(setup_.fed.dp_delta);
  record["dp_epsilon"] = std::isinf(eps) ? nlohmann::json(nullptr) : nlohmann::json(eps);
  record["dp_delta"] = setup_.fed.dp_delta;
}

nlohmann::json Coordinator::aggregate(const std::map<int, Answer>& answers, int64_t round,
                                      int64_t attempt) {
  const FedConfig& fed = setup_.fed;
  nlohmann::json record = {{"aggregator", dp_ ? "dp_mean" : fed.aggregator}};
  std::vector<ClientUpdate> updates;
  std::vector<const float*> deltas;
  bounded_.resize(answers.size());
  double longest = 0;
  int64_t bounded = 0;
  if (fed.secure_aggregation) {  // collect_secure left the survivors' sum in delta_
    const auto survivors = static_cast<double>(answers.size());
    if (dp_) {  // distributed DP: the clients clipped and noised, the sum carries the noise
      const double expected = dp_sampling_probability() * static_cast<double>(setup_.clients);
      for (float& v : delta_) v = static_cast<float>(v / expected);
      record_privacy(record);
    } else {
      for (float& v : delta_) v = static_cast<float>(v / survivors);
    }
    record["aggregator"] = dp_ ? "secure_dp_sum" : "secure_mean";
    server_->apply(model_.params(), delta_.data());
    return record;
  }
  for (const auto& [client, a] : answers) {  // sorted by client: the sums' order is fixed
    const float* delta = a.message.model;
    if (fed.norm_bound > 0) {
      std::vector<float>& copy = bounded_[updates.size()];
      copy.assign(delta, delta + n_);
      const double norm = bound_norm(copy.data(), n_, fed.norm_bound);
      longest = std::max(longest, norm);
      bounded += norm > fed.norm_bound ? 1 : 0;
      delta = copy.data();
    }
    updates.push_back({.client = client,
                       .samples = a.message.header.samples,
                       .delta = delta,
                       .control_delta = a.message.control});
    deltas.push_back(delta);
  }
  if (fed.norm_bound > 0) {
    record["bounded"] = bounded;
    record["longest_update"] = longest;
  }
  if (dp_) {
    const double q = dp_sampling_probability();
    record["dp_clipped"] = dp_->noised_mean(deltas, n_, q * static_cast<double>(setup_.clients),
                                            round, attempt, delta_.data());
    record_privacy(record);
  } else if (fed.aggregator == "mean") {
    weighted_mean_update(updates, n_, delta_.data());
  } else {
    std::vector<double> samples;
    for (const ClientUpdate& u : updates) samples.push_back(static_cast<double>(u.samples));
    const std::vector<int> chosen = robust_combine({.name = fed.aggregator,
                                                    .trim_fraction = fed.trim_fraction,
                                                    .byzantine = fed.byzantine,
                                                    .krum_select = fed.krum_select},
                                                   deltas, samples, n_, delta_.data());
    if (fed.aggregator == "krum" || fed.aggregator == "multi_krum") {
      std::vector<int> selected;
      for (int i : chosen) selected.push_back(updates[static_cast<size_t>(i)].client);
      record["selected"] = selected;
    }
    if (fed.aggregator == "trimmed_mean") {
      record["trimmed"] =
          2 * static_cast<int64_t>(fed.trim_fraction * static_cast<double>(deltas.size()));
    }
  }
  server_->apply(model_.params(), delta_.data());
  if (scaffold_) apply_control_deltas(updates, n_, setup_.clients, control_.data());
  return record;
}

std::pair<double, double> Coordinator::evaluate() {
  double loss_sum = 0, correct = 0, total = 0;
  test_.reset();
  // Examples weigh equally: an image is one target, a window of text T of them. The task loss
  // is reported, without a mixture of experts' load-balancing term.
  while (test_.next(eval_batch_)) {
    const auto count = static_cast<double>(eval_batch_.size);
    const double loss = static_cast<double>(model_.forward(eval_batch_)) - model_.aux_loss();
    loss_sum += loss * count;
    correct += static_cast<double>(model_.correct_predictions());
    total += count;
  }
  total = std::max(total, 1.0);
  return {loss_sum / total, correct / total};
}

void Coordinator::stop_clients() {
  for (const auto& [client, identity] : connected_) {
    FedHeader h;
    h.type = static_cast<uint32_t>(FedType::kStop);
    h.client = static_cast<uint32_t>(client);
    h.run_tag = setup_.run_tag;
    h.round = next_round_;
    socket_.send(identity, encode_fed_message(h, nullptr, nullptr));
  }
}

CoordinatorOutcome Coordinator::run() {
  load_or_initialize();
  const FedConfig& fed = setup_.fed;
  const int64_t last = invocation_end(fed.rounds, next_round_, setup_.stop_after);
  CoordinatorOutcome out;
  // The first round waits for every client it will ask (all of them, or clients_per_round),
  // up to the join timeout; later rounds go on with whoever is connected. DP-FedAvg's Poisson
  // sample is over the whole federation, so it waits for all of it.
  wait_for_clients(fed.clients_per_round > 0 && !dp_
                       ? std::min<int64_t>(fed.clients_per_round, setup_.clients)
                       : setup_.clients);
  for (int64_t round = next_round_; round < last; ++round) {
    const auto start = Clock::now();
    std::map<int, Answer> answers;
    std::vector<int> asked;
    int64_t bytes_down = 0, bytes_up = 0, attempt = 0;
    for (;; ++attempt) {
      wait_for_clients(fed.min_clients);
      refresh_keys_();
      asked = sample(round, attempt);
      // DP-FedAvg aggregates a Poisson sample smaller than fed.min_clients as it is (even an
      // empty one: the noise alone); redrawing it would change the sampling the accountant
      // assumes. fed.min_clients then only bounds how many sampled clients may fail.
      const int64_t needed =
          dp_ ? std::min<int64_t>(fed.min_clients, static_cast<int64_t>(asked.size()))
              : fed.min_clients;
      if (static_cast<int64_t>(asked.size()) >= needed) {
        answers = fed.secure_aggregation
                      ? collect_secure(round, attempt, asked, &bytes_down, &bytes_up)
                      : collect(round, attempt, asked, &bytes_down, &bytes_up);
      }
      if (static_cast<int64_t>(answers.size()) >= needed || setup_.stop_requested()) break;
      // Rounds and attempts are counted from 1 in what the log says, as "round 3/5" is.
      const std::string what = fmt::format(
          "round {} attempt {}: {} of {} asked clients answered within fed.round_deadline_s = {} "
          "s, fewer than fed.min_clients = {} ({} connected)",
          round + 1, attempt + 1, answers.size(), asked.size(), fed.round_deadline_s,
          fed.min_clients, connected_.size());
      if (attempt >= fed.round_retries) {
        stop_clients();
        throw CommError(
            CommError::Kind::kTimeout,
            what + fmt::format("; no retry left (fed.round_retries = {})", fed.round_retries));
      }
      log_.info("{}; retrying", what);
    }
    if (setup_.stop_requested()) {
      // SIGINT/SIGTERM while the round waited: it is dropped unaggregated, and the rounds before
      // it are what is saved, so that a rerun starts this round again.
      save(next_round_);
      if (setup_.on_saved) setup_.on_saved(next_round_);
      out.interrupted = true;
      log_.info("interrupted during round {}: {}; rerun the same command to go on", round + 1,
                next_round_ == 0 ? std::string("no round was complete")
                                 : fmt::format("rounds 1-{} are saved", next_round_));
      break;
    }
    nlohmann::json record = aggregate(answers, round, attempt);
    next_round_ = round + 1;
    record.update({{"round", round + 1},
                   {"attempts", attempt + 1},
                   {"asked", asked.size()},
                   {"answered", answers.size()},
                   {"bytes_down", bytes_down},
                   {"bytes_up", bytes_up},
                   {"refused", refused_}});
    std::vector<int> participants;
    nlohmann::json client_seconds = nlohmann::json::object();
    int64_t correct = 0, seen = 0;
    double loss_sum = 0;
    for (const auto& [client, a] : answers) {
      participants.push_back(client);
      aggregated_[static_cast<size_t>(client)] = round;
      client_seconds[std::to_string(client)] = a.seconds;
      correct += a.message.header.correct;
      seen += a.message.header.seen;
      loss_sum += a.message.header.loss * static_cast<double>(a.message.header.seen);
    }
    record["participants"] = participants;
    record["client_s"] = client_seconds;
    record["bytes_per_client"] =
        asked.empty() ? 0 : (bytes_down + bytes_up) / static_cast<int64_t>(asked.size());
    if (seen > 0) {
      record["train_loss"] = loss_sum / static_cast<double>(seen);
      if (setup_.classifier) {
        record["local_accuracy"] = static_cast<double>(correct) / static_cast<double>(seen);
      }
    }
    const bool eval_now =
        (fed.eval_every > 0 && next_round_ % fed.eval_every == 0) || next_round_ == last;
    std::string test_text;
    if (eval_now) {
      std::tie(out.test_loss, out.test_accuracy) = evaluate();
      record["test_loss"] = out.test_loss;
      if (setup_.classifier) {
        record["test_accuracy"] = out.test_accuracy;
        test_text = fmt::format(", test accuracy {:.2f}% (loss {:.4f})", 100 * out.test_accuracy,
                                out.test_loss);
      } else {
        test_text = fmt::format(", test loss {:.4f}", out.test_loss);
      }
    }
    if (dp_) {
      out.dp_epsilon = accountant_.epsilon(fed.dp_delta);
      test_text += fmt::format(", ({:.3g}, {:.3g})-DP", out.dp_epsilon, fed.dp_delta);
    }
    out.interrupted = next_round_ < last && setup_.stop_requested();
    const bool save_now = (fed.ckpt_every > 0 && next_round_ % fed.ckpt_every == 0) ||
                          next_round_ == last || out.interrupted;
    if (save_now) {
      save(next_round_);
      if (setup_.on_saved) setup_.on_saved(next_round_);
    }
    record["round_s"] = seconds_since(start);
    metrics_.write("round", record);
    log_.info("round {}/{}: {} of {} clients answered in {:.2f} s{}, {:.2f} MB moved", next_round_,
              fed.rounds, answers.size(), asked.size(), seconds_since(start), test_text,
              static_cast<double>(bytes_down + bytes_up) / 1e6);
    ++out.rounds_done;
    if (out.interrupted) {
      log_.info("interrupted: round {} is saved; rerun the same command to go on", next_round_);
      break;
    }
  }
  out.next_round = next_round_;
  stop_clients();
  return out;
}

}  // namespace brigade
