#include "brigade/fed/client.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "brigade/base/error.h"
#include "brigade/fed/fed_message.h"
#include "brigade/fed/state_file.h"

namespace brigade {

namespace {

using Clock = std::chrono::steady_clock;

FedHeader header_for(const ClientSetup& setup, FedType type) {
  FedHeader h;
  h.type = static_cast<uint32_t>(type);
  h.client = static_cast<uint32_t>(setup.client);
  h.run_tag = setup.run_tag;
  return h;
}

// Test hook: BRIGADE_FAULT_FED_LATE = "client:round:seconds" makes `client` wait that long
// before it answers the first attempt of round `round` (1-based), as a slow client would.
// Malformed values are ignored.
double late_by_fault(int client, int64_t round, int64_t attempt) {
  const char* spec = std::getenv("BRIGADE_FAULT_FED_LATE");
  int c = -1;
  long long r = 0;
  double seconds = 0;
  if (!spec || attempt != 0 || std::sscanf(spec, "%d:%lld:%lf", &c, &r, &seconds) != 3) return 0;
  return c == client && r == round + 1 && seconds > 0 && seconds < 3600 ? seconds : 0;
}

}  // namespace

Client::Client(const ClientSetup& setup, LocalTrainer& trainer, Model& model, CurveClientLink& link,
               std::function<bool()> finished, Log& log)
    : setup_(setup),
      trainer_(trainer),
      model_(model),
      link_(link),
      finished_(std::move(finished)),
      log_(log),
      n_(model.num_params()) {
  control_.assign(static_cast<size_t>(n_), 0.0f);
  control_before_ = control_;
  delta_.assign(static_cast<size_t>(n_), 0.0f);
  control_delta_ = delta_;
}

void Client::load_state() {
  if (!std::filesystem::exists(setup_.state_path)) return;
  const StateFile state = read_state_file(setup_.state_path);
  control_ = state.tensor("control", n_, setup_.state_path);
  control_before_ = state.tensor("control_before", n_, setup_.state_path);
  control_round_ = state.int_or("control_round", -1);
}

void Client::answer(const FedMessage& train) {
  const FedHeader& t = train.header;
  const auto start = Clock::now();
  const bool scaffold = t.controls == 1;
  // A round this client already trained (a retry, or a coordinator that resumed from an
  // earlier state) starts again from the control variate that round started with; so does the
  // round after one whose answer the coordinator did not aggregate (it came too late), so that
  // c stays the mean of the c_i.
  if (scaffold && (control_round_ >= t.round || t.aggregated < control_round_)) {
    control_ = control_before_;
  }
  control_before_ = control_;
  const LocalResult r = trainer_.train(t.round, train.model, scaffold ? train.control : nullptr,
                                       scaffold ? control_.data() : nullptr, delta_.data(),
                                       scaffold ? control_delta_.data() : nullptr);
  if (scaffold) {
    control_round_ = t.round;
    StateFile state;
    state.ints["control_round"] = control_round_;
    state.tensors["control"] = control_;
    state.tensors["control_before"] = control_before_;
    write_state_file(setup_.state_path, state);
  }
  corrupt_update(setup_.attack,
                 mix_seed(setup_.seed, 0xa77ac, static_cast<uint64_t>(setup_.client),
                          static_cast<uint64_t>(t.round)),
                 delta_.data(), n_);
  const bool secure = t.threshold > 0;
  FedHeader h = header_for(setup_, secure ? FedType::kSecAgg : FedType::kUpdate);
  h.round = t.round;
  h.attempt = t.attempt;
  h.count = secure ? 0 : n_;
  h.controls = scaffold ? 1 : 0;
  h.samples = r.samples;
  h.steps = r.steps;
  h.correct = r.correct;
  h.seen = r.seen;
  // A "nan" attacker reports what a diverged client does: a non-finite loss as well, which
  // makes its whole message malformed (fed_message.h).
  h.loss = setup_.attack.kind == "nan" ? std::nan("") : r.loss;
  h.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (const double late = late_by_fault(setup_.client, t.round, t.attempt); late > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(late));
  }
  if (secure) {
    start_secure_round(t, h);
  } else {
    link_.send(encode_fed_message(h, delta_.data(), scaffold ? control_delta_.data() : nullptr));
  }
  const std::string accuracy =
      setup_.classifier && r.seen > 0
          ? fmt::format(", local accuracy {:.2f}%",
                        100.0 * static_cast<double>(r.correct) / static_cast<double>(r.seen))
          : "";
  log_.info("round {}: {} local steps on {} examples, loss {:.4f}{}, {:.2f} s", t.round + 1,
            r.steps, r.samples, r.loss, accuracy, h.seconds);
}

int64_t Client::run() {
  load_state();
  link_.send(encode_fed_message(header_for(setup_, FedType::kHello), nullptr, nullptr));
  int64_t rounds = 0;
  auto last_heard = Clock::now();
  auto next_hello = Clock::now() + std::chrono::seconds(2);
  while (true) {
    std::optional<zmq::multipart_t> frames = link_.receive(std::chrono::milliseconds(500));
    if (!frames) {
      if (finished_()) return rounds;
      if (Clock::now() - last_heard > setup_.idle_timeout) {
        throw CommError(
            CommError::Kind::kTimeout,
            fmt::format(
                "client {}: no word from the coordinator at {} for {} s", setup_.client,
                link_.endpoint(),
                std::chrono::duration_cast<std::chrono::seconds>(setup_.idle_timeout).count()));
      }
      // Until the first round comes, the hello is repeated: the coordinator may have admitted
      // this client's key only after the first one was refused.
      if (rounds == 0 && Clock::now() >= next_hello) {
        link_.send(encode_fed_message(header_for(setup_, FedType::kHello), nullptr, nullptr));
        next_hello = Clock::now() + std::chrono::seconds(2);
      }
      continue;
    }
    last_heard = Clock::now();
    std::string why;
    std::optional<FedMessage> m = decode_fed_message(std::move(*frames), setup_.run_tag, n_, &why);
    if (!m) {
      log_.info("refused a message from the coordinator: {}", why);
      continue;
    }
    const auto type = static_cast<FedType>(m->header.type);
    if (type == FedType::kStop) return rounds;
    if (type == FedType::kSecAggServer) {
      step_secure_round(*m);
      continue;
    }
    if (type != FedType::kTrain || m->header.count != n_ ||
        m->header.client != static_cast<uint32_t>(setup_.client)) {
      log_.info("refused a {} message for client {} with {} values from the coordinator",
                fed_type_name(type), m->header.client, m->header.count);
      continue;
    }
    answer(*m);
    ++rounds;
  }
}

}  // namespace brigade
