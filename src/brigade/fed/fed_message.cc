#include "brigade/fed/fed_message.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace brigade {

const char* fed_type_name(FedType type) {
  switch (type) {
    case FedType::kHello:
      return "hello";
    case FedType::kUpdate:
      return "update";
    case FedType::kTrain:
      return "train";
    case FedType::kStop:
      return "stop";
    case FedType::kSecAgg:
    case FedType::kSecAggServer:
      return "secure-aggregation step";
  }
  return "unknown";
}

zmq::multipart_t encode_fed_message(const FedHeader& header, const float* model,
                                    const float* control) {
  zmq::multipart_t frames;
  frames.addmem(&header, sizeof header);
  const size_t bytes = static_cast<size_t>(header.count) * sizeof(float);
  if (header.count > 0 || header.controls) frames.addmem(model, bytes);
  if (header.controls) frames.addmem(control, bytes);
  return frames;
}

int64_t fed_message_bytes(const zmq::multipart_t& frames) {
  int64_t bytes = 0;
  for (const zmq::message_t& f : frames) bytes += static_cast<int64_t>(f.size());
  return bytes;
}

zmq::multipart_t encode_fed_secagg(const FedHeader& header, std::span<const uint8_t> bytes) {
  zmq::multipart_t frames;
  frames.addmem(&header, sizeof header);
  frames.addmem(bytes.data(), bytes.size());
  return frames;
}

std::optional<FedMessage> decode_fed_message(zmq::multipart_t&& frames, uint64_t expected_tag,
                                             int64_t max_values, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<FedMessage> {
    *why = std::move(reason);
    return std::nullopt;
  };
  if (frames.empty() || frames.size() > 3) {
    return fail(fmt::format("{} frames (a message has 1 to 3)", frames.size()));
  }
  FedMessage m;
  const zmq::message_t& head = frames[0];
  if (head.size() != sizeof(FedHeader)) {
    return fail(fmt::format("a header of {} bytes (expected {})", head.size(), sizeof(FedHeader)));
  }
  std::memcpy(&m.header, head.data(), sizeof(FedHeader));
  const FedHeader& h = m.header;
  if (h.magic != kFedMagic) return fail(fmt::format("bad magic 0x{:08x}", h.magic));
  if (h.version != kFedVersion) {
    return fail(fmt::format("protocol version {} (this build speaks {})", h.version, kFedVersion));
  }
  const auto type = static_cast<FedType>(h.type);
  const bool secagg = type == FedType::kSecAgg || type == FedType::kSecAggServer;
  if (type != FedType::kHello && type != FedType::kUpdate && type != FedType::kTrain &&
      type != FedType::kStop && !secagg) {
    return fail(fmt::format("unknown message type {}", h.type));
  }
  if (h.run_tag != expected_tag) return fail("a message of another run (run tag differs)");
  if (h.threshold < 0 || h.threshold > 255) {
    return fail(fmt::format("a secure-aggregation threshold of {}", h.threshold));
  }
  if (secagg) {
    if (frames.size() != 2 || h.count != 0 || h.controls != 0) {
      return fail("a secure-aggregation step is a header with count 0 and one frame of bytes");
    }
    const auto limit = static_cast<size_t>(std::min(kFedMaxSecAggBytes, max_values * 4 + 65536));
    if (frames[1].size() > limit) {
      return fail(fmt::format("a secure-aggregation step of {} bytes (at most {})",
                              frames[1].size(), limit));
    }
  }
  if (h.count < 0 || h.count > max_values) {
    return fail(fmt::format("{} values (at most {} accepted)", h.count, max_values));
  }
  if (h.controls != 0 && h.controls != 1) return fail(fmt::format("controls = {}", h.controls));
  const size_t want_frames =
      secagg ? 2 : 1 + (h.count > 0 || h.controls ? 1 : 0) + (h.controls ? 1 : 0);
  if (frames.size() != want_frames) {
    return fail(fmt::format("{} frames for {} values{} (expected {})", frames.size(), h.count,
                            h.controls ? " with a control variate" : "", want_frames));
  }
  const size_t bytes = static_cast<size_t>(h.count) * sizeof(float);
  for (size_t f = 1; f < frames.size() && !secagg; ++f) {
    if (frames[f].size() != bytes) {
      return fail(fmt::format("frame {} of {} bytes for {} values", f, frames[f].size(), h.count));
    }
  }
  if (h.round < 0 || h.attempt < 0 || h.samples < 0 || h.steps < 0 || h.correct < 0 || h.seen < 0 ||
      h.correct > h.seen) {
    return fail("a negative round, attempt or count (or more correct than seen)");
  }
  if (!std::isfinite(h.loss) || !std::isfinite(h.seconds) || h.seconds < 0) {
    return fail("a non-finite loss or duration");
  }
  m.frames = std::move(frames);
  // ZeroMQ allocates message bodies with malloc: aligned for float.
  if (secagg) {
    m.secagg = {static_cast<const uint8_t*>(m.frames[1].data()), m.frames[1].size()};
    return m;
  }
  if (m.frames.size() >= 2) m.model = static_cast<const float*>(m.frames[1].data());
  if (m.frames.size() == 3) m.control = static_cast<const float*>(m.frames[2].data());
  return m;
}

}  // namespace brigade
