#pragma once
// The federated-learning messages (fed/): what the coordinator and its clients say to each other
// over ZeroMQ with CURVE (comm/curve_socket.h). A message is one ZeroMQ multipart message:
//
//   frame 0  FedHeader, fixed size, little-endian as the host writes it (the magic and version
//            catch a peer of another build or architecture)
//   frame 1  the model: header.count f32 values (kTrain: the global parameters; kUpdate: the
//            client's update, its local parameters minus the global ones)
//   frame 2  SCAFFOLD only: header.count f32 values (kTrain: the global control variate c;
//            kUpdate: the change of the client's control variate, c_i+ - c_i)
//
// Under secure aggregation (fed.secure_aggregation) the answer to kTrain is not a kUpdate but
// the steps of a secure-aggregation round: kSecAgg (client -> coordinator) and kSecAggServer
// (coordinator -> client) carry count = 0 and one frame of bytes, a message of fed/secagg/wire.h,
// which its own decoder checks.
//
// Everything the coordinator reads is bounded and checked before use (decode_fed_message): the
// frame count and sizes, magic, version, type and run tag; what it may mean for the round (its
// round and attempt, whether the client was asked, finite values) is checked by the
// coordinator (fed_round.h). A message that fails is refused with a reason and changes nothing.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace brigade {

enum class FedType : uint32_t {
  // client -> coordinator
  kHello = 1,   // this client is connected and ready for rounds
  kUpdate = 2,  // the answer to kTrain
  kSecAgg = 3,  // a secure-aggregation step (frame 1: fed/secagg/wire.h bytes)
  // coordinator -> client
  kTrain = 16,         // train round `round` (attempt `attempt`) from these parameters
  kStop = 17,          // the run is over (or this invocation stops): exit
  kSecAggServer = 18,  // a secure-aggregation step (frame 1: fed/secagg/wire.h bytes)
};
const char* fed_type_name(FedType type);

inline constexpr uint32_t kFedMagic = 0x314c4642;  // "BFL1"
inline constexpr uint32_t kFedVersion = 3;

struct FedHeader {
  uint32_t magic = kFedMagic;
  uint32_t version = kFedVersion;
  uint32_t type = 0;
  uint32_t client = 0;   // the sending client, or the client a message is for
  uint64_t run_tag = 0;  // drawn per job by the coordinator: another job's message is refused
  int64_t round = 0;     // 0-based
  int64_t attempt = 0;   // 0 for a round's first try, +1 per retry
  int64_t count = 0;     // f32 values per model frame (frames 1 and 2)
  int64_t controls = 0;  // 1: frame 2 holds a control variate (SCAFFOLD)
  int64_t samples = 0;   // kUpdate: examples the client trained on (FedAvg's weight)
  int64_t steps = 0;     // kUpdate: local optimizer steps taken
  int64_t correct = 0;   // kUpdate: correct predictions over the last local epoch
  int64_t seen = 0;      // kUpdate: examples of that epoch
  double loss = 0;       // kUpdate: mean training loss of the last local epoch
  double seconds = 0;    // kUpdate: the client's training time this round
  // kTrain: > 0 asks for secure aggregation with this threshold t (fed/secagg/protocol.h).
  int64_t threshold = 0;
  // kTrain: the last round whose update from this client the coordinator aggregated (-1:
  // none), so a SCAFFOLD client whose answer came too late takes back that round's c_i step.
  int64_t aggregated = -1;
};
static_assert(sizeof(FedHeader) == 120, "FedHeader is a wire format: keep its size");

// A decoded message; model and control point into frames (valid as long as the message).
struct FedMessage {
  FedHeader header;
  zmq::multipart_t frames;
  const float* model = nullptr;    // header.count values; null when count is 0
  const float* control = nullptr;  // header.count values when header.controls; else null
  // kSecAgg, kSecAggServer: the secure-aggregation message; else empty.
  std::span<const uint8_t> secagg;
};

// The largest model a message may carry (2^28 values, 1 GiB).
inline constexpr int64_t kFedMaxValues = int64_t{1} << 28;

// The largest secure-aggregation frame: a masked model and room for rosters and shares.
inline constexpr int64_t kFedMaxSecAggBytes = kFedMaxValues * 4 + (int64_t{1} << 20);

// The bytes of a message on the wire (its frames), as the metrics count them.
int64_t fed_message_bytes(const zmq::multipart_t& frames);

// Builds a kSecAgg or kSecAggServer message: header (count 0) and the step's bytes.
zmq::multipart_t encode_fed_secagg(const FedHeader& header, std::span<const uint8_t> bytes);

// Builds the frames of a message; model and control may be null (then count must be 0, or
// controls 0 for control).
zmq::multipart_t encode_fed_message(const FedHeader& header, const float* model,
                                    const float* control);
// Decodes and checks frames (taking them); on failure returns nullopt and says why in *why.
// expected_tag: the run's tag. max_values: the largest model this receiver accepts.
std::optional<FedMessage> decode_fed_message(zmq::multipart_t&& frames, uint64_t expected_tag,
                                             int64_t max_values, std::string* why);

}  // namespace brigade
