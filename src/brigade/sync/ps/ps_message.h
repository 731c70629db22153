#pragma once
// The parameter-server messages (sync/ps/): what workers and servers say to each other over
// ZeroMQ (comm/curve_socket.h). A message is one ZeroMQ multipart message of 1 to 3 frames:
//
//   frame 0  PsHeader, fixed size, little-endian as the host writes it (both ends run brigade
//            on the same architecture; the magic and version catch anything else)
//   frame 1  payload: header.count f32 values (gradients, parameters, optimizer state)
//   frame 2  staleness record (PsStalenessRecord), only in kParams replies
//
// Everything a server reads is bounded and checked before use (decode_ps_message): the frame
// count and sizes, the magic, version, type and run tag; what a message may mean for the server's
// state (its worker, its clock, its range) is checked by the server (ps_server.cc). A message that
// fails is refused with a reason and changes nothing.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace brigade {

enum class PsType : uint32_t {
  // worker -> server
  kInit = 1,       // worker 0: the range's parameters, then its optimizer state buffers
  kPush = 2,       // bsp: this clock's gradients; the server answers kNorm when all arrived
  kApply = 3,      // bsp: apply this clock (lr, clip scale, update count, or skip)
  kPushApply = 4,  // ssp, asp: gradients applied on arrival (empty and flagged when skipped),
                   // and the pull of the next clock (ps.assignment = "dynamic": next_clock,
                   // unless flagged kPsFlagNoNext)
  kPull = 5,       // parameters for clock `clock`, once the consistency model allows (flagged
                   // kPsFlagDrain: once every other worker has stopped or left)
  kStateGet = 6,   // worker 0: parameters and optimizer state, for a checkpoint of step
                   // `updates` (ssp/asp: the servers' cut of that step when they took one)
  kStop = 7,       // this worker is done
  kJoin = 8,       // workers 1..N-1 at start (a restarted one: rejoining): the server answers
                   // kJoined once initialised
  // server -> worker
  kNorm = 16,    // bsp: the squared norm of the range's mean gradient (header.value)
  kParams = 17,  // the range's parameters; header.clock = clocks every worker has completed
  kState = 18,   // parameters then optimizer state buffers; updates = the pushes they hold
                 // (bsp: clocks), flagged kPsFlagCut when they are a consistent cut
  kAck = 19,     // kInit was applied
  kJoined = 20,  // clock = the clocks this worker has completed, updates = the step the job's
                 // invocation started at (worker 0's kInit); flagged kPsFlagRejoin when the
                 // worker had joined before (it was restarted)
};
const char* ps_type_name(PsType type);

inline constexpr uint32_t kPsMagic = 0x31535042;  // "BPS1"
inline constexpr uint32_t kPsVersion = 3;
inline constexpr uint32_t kPsFlagSkip = 1;  // kApply, kPushApply: the worker skips this update
// kPull after kJoin: the worker resumes at `clock`, which may be ahead of this server's count
// for it (it died between its pushes to two servers): the server moves its count there.
inline constexpr uint32_t kPsFlagRejoin = 2;
// ps.assignment = "dynamic". kPushApply: the worker has no next slice (the data order of the
// invocation is handed out), so the push pulls nothing. kPull: worker 0, out of slices, asks
// for the parameters once every other worker has stopped or left, so its final evaluation and
// checkpoint hold every slice's update.
inline constexpr uint32_t kPsFlagNoNext = 4;
inline constexpr uint32_t kPsFlagDrain = 8;
// kState: the state is a consistent cut of the step asked for: every update of the steps
// before it applied and none of a later one (ps_server.h, "Checkpoints").
inline constexpr uint32_t kPsFlagCut = 16;

struct PsHeader {
  uint32_t magic = kPsMagic;
  uint32_t version = kPsVersion;
  uint32_t type = 0;
  uint32_t worker = 0;     // the sending worker, or the worker a reply is for
  uint64_t run_tag = 0;    // drawn per job by worker 0 (ps_rendezvous.h): another job's is refused
  int64_t clock = 0;       // the worker's step index in this invocation (0-based)
  int64_t read_clock = 0;  // ssp/asp pushes: the clock the gradient's parameters were read at
  int64_t updates = 0;     // the 1-based update count (AdamW's bias correction)
  float lr = 0;
  float scale = 1;  // bsp: the clip scale every worker agreed on
  uint32_t flags = 0;
  uint32_t reserved = 0;
  int64_t count = 0;       // f32 values in frame 1
  double value = 0;        // kNorm: the squared norm
  int64_t next_clock = 0;  // dynamic kPushApply: the clock (global step) of the next slice
};
static_assert(sizeof(PsHeader) == 88, "PsHeader is a wire format: keep its size");

// Staleness of the updates a server applied (clocks between the read and the write), as
// counts of 0, 1, ..., kBuckets - 2 and kBuckets - 1 or more, with the largest seen.
struct PsStalenessRecord {
  static constexpr int kBuckets = 16;
  std::array<int64_t, kBuckets> counts{};
  int64_t max = 0;
  int64_t applied = 0;  // updates applied (ssp/asp: pushes; bsp: clocks)
  void add(int64_t staleness);
  PsStalenessRecord& operator+=(const PsStalenessRecord& o);
};

// A decoded message; payload points into frames (valid as long as the message), so the
// receiver reads gradients where ZeroMQ put them, without a copy of its own.
struct PsMessage {
  PsHeader header;
  zmq::multipart_t frames;
  const float* payload = nullptr;  // header.count values; null when 0
  std::optional<PsStalenessRecord> staleness;
};

// The largest payload a message may carry: a server's range (parameters and two AdamW state
// buffers) is far below it for any model brigade trains on one host's memory.
inline constexpr int64_t kPsMaxPayloadValues = int64_t{1} << 31;

// Builds the frames of a message (payload may be null when count is 0).
zmq::multipart_t encode_ps_message(const PsHeader& header, const float* payload,
                                   const PsStalenessRecord* staleness = nullptr);
// Decodes and checks frames (taking them); on failure returns nullopt and says why in *why.
// expected_tag: the run's tag. max_values: the largest payload this receiver accepts.
std::optional<PsMessage> decode_ps_message(zmq::multipart_t&& frames, uint64_t expected_tag,
                                           int64_t max_values, std::string* why);

}  // namespace brigade
