// A parameter server (sync/ps/ps_server.h) fed mutated messages, as a broken or hostile worker
// that got past authentication would send them. The input is the message's frames
// (fuzz_frames.h); the seeds are the messages a worker really sends, one case per state it
// can meet: a fresh server (init), and initialised BSP and SSP servers in mid-clock.
//
// A message is accepted or refused (the server's refusal is raised here as an IoError with the
// server's reason). A refused message must change nothing (the state read back is bitwise the
// state before; a fresh server still takes a valid init); after an accepted one the server must
// still answer. A crash, a thrown non-brigade error, a changed state or a server that stops
// answering is the defect.
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/sync/ps/ps_server.h"
#include "brigade/tensor/param_spec.h"
#include "fuzz/fuzz_frames.h"
#include "fuzz/fuzz_target.h"

namespace brigade::fuzz {

namespace {

constexpr uint64_t kTag = 0x5eed5eed5eed5eedull;
constexpr int kWorkers = 2;
constexpr int64_t kBegin = 3, kEnd = 19;  // cuts through both tensors
constexpr int64_t kN = kEnd - kBegin;

ParamLayout layout() {
  ParamLayout l;
  l.add({.name = "w", .shape = {3, 4}, .weight_decay = true});
  l.add({.name = "b", .shape = {9}, .weight_decay = false});
  return l;
}

PsHeader header(PsType type, int worker, int64_t clock) {
  PsHeader h;
  h.type = static_cast<uint32_t>(type);
  h.worker = static_cast<uint32_t>(worker);
  h.run_tag = kTag;
  h.clock = clock;
  return h;
}

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<float>(i % 7 - 3);
  return v;
}

// One server and the replies it sends, in one of the states a seed targets.
struct Harness {
  enum class State { kFresh, kBspMidClock, kSspRunning };

  explicit Harness(State state)
      : server(PsServerOptions{.workers = kWorkers,
                               .begin = kBegin,
                               .end = kEnd,
                               .consistency = state == State::kSspRunning ? PsConsistency::kSsp
                                                                          : PsConsistency::kBsp,
                               .staleness = 1,
                               .run_tag = kTag},
               layout(), OptimizerConfig{.name = "sgd", .weight_decay = 0.1f, .momentum = 0.5f},
               [this](const std::string& line) { last_refusal = line; }) {
    if (state == State::kFresh) return;
    std::vector<float> init = ramp(kN, 0.25f), momentum = ramp(kN, -0.125f);
    init.insert(init.end(), momentum.begin(), momentum.end());
    PsHeader h = header(PsType::kInit, 0, 0);
    h.count = 2 * kN;
    send(0, encode_ps_message(h, init.data()));
    if (state == State::kBspMidClock) {
      PsHeader p = header(PsType::kPush, 1, 0);
      p.count = kN;
      const std::vector<float> g = ramp(kN, 1.0f);
      send(1, encode_ps_message(p, g.data()));
    }
  }

  void send(int worker, zmq::multipart_t&& frames) {
    server.handle(worker, std::move(frames), [this](int w, zmq::multipart_t&& f) {
      std::string why;
      auto m = decode_ps_message(std::move(f), kTag, 1 << 20, &why);
      if (!m) throw std::logic_error("the server sent a malformed reply: " + why);
      last_reply[w] = std::move(*m);
    });
  }

  // The server's parameters and momentum, through worker 1's kStateGet (worker 0 sends the
  // fuzzed messages and may have stopped).
  std::vector<float> state() {
    send(1, encode_ps_message(header(PsType::kStateGet, 1, 0), nullptr));
    const PsMessage& m = last_reply[1];
    if (static_cast<PsType>(m.header.type) != PsType::kState || m.header.count != 2 * kN) {
      throw std::logic_error("the server no longer answers kStateGet with its state");
    }
    return std::vector<float>(m.payload, m.payload + 2 * kN);
  }

  ParameterServer server;
  std::string last_refusal;
  PsMessage last_reply[kWorkers];
};

class PsMessageTarget final : public Target {
 public:
  std::vector<std::string> seeds() override {
    std::vector<std::string> out;
    const std::vector<float> g = ramp(kN, 0.5f);
    const std::vector<float> init(static_cast<size_t>(2 * kN), 0.5f);
    PsHeader h = header(PsType::kInit, 0, 0);
    h.count = 2 * kN;
    out.push_back(frames_to_input(encode_ps_message(h, init.data())));  // fresh server
    h = header(PsType::kPush, 0, 0);
    h.count = kN;
    out.push_back(frames_to_input(encode_ps_message(h, g.data())));  // bsp, worker 1 pushed
    h = header(PsType::kApply, 0, 0);
    h.lr = 0.1f;
    h.updates = 1;
    out.push_back(frames_to_input(encode_ps_message(h, nullptr)));
    h = header(PsType::kPushApply, 0, 0);
    h.lr = 0.1f;
    h.updates = 1;
    h.count = kN;
    out.push_back(frames_to_input(encode_ps_message(h, g.data())));  // ssp
    out.push_back(frames_to_input(encode_ps_message(header(PsType::kPull, 0, 0), nullptr)));
    out.push_back(frames_to_input(encode_ps_message(header(PsType::kStop, 0, 0), nullptr)));
    return out;
  }

  Outcome run(std::string_view input) override {
    // The state each seed was made for, told apart by the message type a mutation may keep.
    PsHeader h{};
    zmq::multipart_t frames = input_to_frames(input);
    if (!frames.empty() && frames[0].size() >= sizeof(PsHeader)) {
      std::memcpy(&h, frames[0].data(), sizeof h);
    }
    const Harness::State state =
        static_cast<PsType>(h.type) == PsType::kInit        ? Harness::State::kFresh
        : static_cast<PsType>(h.type) == PsType::kPushApply ? Harness::State::kSspRunning
                                                            : Harness::State::kBspMidClock;
    Harness s(state);
    const std::vector<float> before =
        state == Harness::State::kFresh ? std::vector<float>{} : s.state();
    const int64_t refused = s.server.refused();
    s.send(0, std::move(frames));
    if (s.server.refused() == refused) {
      if (!s.server.done() && state != Harness::State::kFresh) s.state();  // still answers
      return Outcome{.accepted = true};
    }
    // Refused: nothing changed, and the server still takes the messages it should.
    if (state == Harness::State::kFresh) {
      const std::vector<float> init = ramp(2 * kN, 0.125f);
      PsHeader i = header(PsType::kInit, 0, 0);
      i.count = 2 * kN;
      s.send(0, encode_ps_message(i, init.data()));
      if (s.state() != init) throw std::logic_error("a refused message broke a fresh server");
    } else if (s.state() != before) {
      throw std::logic_error("a refused message changed the server's state");
    }
    throw IoError("parameter server: " + s.last_refusal);
  }
};

}  // namespace

std::unique_ptr<Target> make_ps_message_target(const std::string&) {
  return std::make_unique<PsMessageTarget>();
}

}  // namespace brigade::fuzz
