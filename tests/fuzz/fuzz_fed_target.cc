// The federated coordinator's two inputs from outside: a client's message (decoded and checked
// against the round being collected, as the coordinator does with every message,
// fed/fed_message.h + fed/update_check.h) and its own state file (fed/state_file.h), read back
// on resume. A refused message is an IoError with the reason; an accepted update must be one
// the round can aggregate (the model's length, finite values, a plausible weight). A state file
// is checksummed: what it accepts must be what was written (fed_state); fed_state_resealed
// re-checksums each mutation to reach the checks behind the checksum.
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "brigade/base/crc32c.h"
#include "brigade/base/error.h"
#include "brigade/fed/fed_message.h"
#include "brigade/fed/state_file.h"
#include "brigade/fed/update_check.h"
#include "fuzz/fuzz_frames.h"
#include "fuzz/fuzz_target.h"

namespace brigade::fuzz {

namespace {

constexpr uint64_t kTag = 0xfeedfeedfeedfeedull;
constexpr int64_t kValues = 12;

RoundInProgress round_in_progress(bool scaffold) {
  RoundInProgress r;
  r.round = 4;
  r.attempt = 1;
  r.values = kValues;
  r.scaffold = scaffold;
  r.asked = {0, 2};
  r.answered = {2};
  return r;
}

class FedMessageTarget final : public Target {
 public:
  std::vector<std::string> seeds() override {
    std::vector<std::string> out;
    std::vector<float> model(kValues), control(kValues);
    for (int64_t i = 0; i < kValues; ++i) {
      model[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i - 5);
      control[static_cast<size_t>(i)] = -0.002f * static_cast<float>(i);
    }
    FedHeader h;
    h.type = static_cast<uint32_t>(FedType::kUpdate);
    h.client = 0;
    h.run_tag = kTag;
    h.round = 4;
    h.attempt = 1;
    h.count = kValues;
    h.samples = 6000;
    h.steps = 940;
    h.correct = 5000;
    h.seen = 6000;
    h.loss = 0.4;
    h.seconds = 12.5;
    out.push_back(frames_to_input(encode_fed_message(h, model.data(), nullptr)));
    h.controls = 1;
    out.push_back(frames_to_input(encode_fed_message(h, model.data(), control.data())));
    FedHeader hello;
    hello.type = static_cast<uint32_t>(FedType::kHello);
    hello.run_tag = kTag;
    out.push_back(frames_to_input(encode_fed_message(hello, nullptr, nullptr)));
    FedHeader step = hello;  // a secure-aggregation step: its bytes are secagg_message's
    step.type = static_cast<uint32_t>(FedType::kSecAgg);
    step.round = 4;
    const std::vector<uint8_t> bytes(72, 0x5a);
    out.push_back(frames_to_input(encode_fed_secagg(step, bytes)));
    return out;
  }

  Outcome run(std::string_view input) override {
    std::string why;
    std::optional<FedMessage> m = decode_fed_message(input_to_frames(input), kTag, 1 << 16, &why);
    if (!m) throw IoError("federated message: " + why);
    if (static_cast<FedType>(m->header.type) != FedType::kUpdate) return {.accepted = true};
    why = update_refusal(*m, 0, round_in_progress(m->header.controls == 1));
    if (!why.empty()) throw IoError("federated update: " + why);
    // Accepted: the coordinator will read count values of each frame and weight by samples.
    if (m->header.count != kValues || m->header.samples < 1 || !m->model) {
      throw std::logic_error("an update the round cannot aggregate was accepted");
    }
    for (int64_t i = 0; i < kValues; ++i) {
      if (!std::isfinite(m->model[i]) || (m->control && !std::isfinite(m->control[i]))) {
        throw std::logic_error("a non-finite update was accepted");
      }
    }
    return {.accepted = true};
  }
};

// resealed: the mutated file gets a fresh CRC-32C before it is read, so mutations reach the
// bounds checks behind the checksum (entry counts, name lengths, value counts, trailing bytes);
// what they accept is then not required to equal the seed.
class FedStateTarget final : public Target {
 public:
  FedStateTarget(std::string dir, bool resealed)
      : path_(dir + "/coordinator.state"), resealed_(resealed) {}

  std::vector<std::string> seeds() override {
    write_state_file(path_, seed_state());
    std::ifstream f(path_, std::ios::binary);
    return {std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>())};
  }

  Outcome run(std::string_view input) override {
    std::string bytes(input);
    if (resealed_ && bytes.size() >= 4) {
      const uint32_t crc = crc32c(bytes.data(), bytes.size() - 4);
      std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
    }
    std::ofstream(path_, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const StateFile got = read_state_file(path_);
    const StateFile want = seed_state();
    return {.accepted = true, .changed = got.ints != want.ints || got.tensors != want.tensors};
  }

  std::string names() const override { return path_; }
  bool checksummed() const override { return !resealed_; }

 private:
  static StateFile seed_state() {
    StateFile s;
    s.ints["next_round"] = 7;
    s.ints["clients"] = 10;
    s.tensors["params"] = {0.5f, -1.25f, 3, 0, 1e-3f};
    s.tensors["control"] = {0, 0.1f, -0.2f, 0.3f, 0};
    s.tensors["server.m"] = {1, 2, 3, 4, 5};
    return s;
  }

  std::string path_;
  bool resealed_;
};

}  // namespace

std::unique_ptr<Target> make_fed_message_target(const std::string&) {
  return std::make_unique<FedMessageTarget>();
}

std::unique_ptr<Target> make_fed_state_target(const std::string& dir) {
  return std::make_unique<FedStateTarget>(dir, false);
}

std::unique_ptr<Target> make_fed_state_resealed_target(const std::string& dir) {
  return std::make_unique<FedStateTarget>(dir, true);
}

}  // namespace brigade::fuzz
