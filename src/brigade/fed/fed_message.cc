#include "brigade/fed/fed_message.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "brigade/comm/framed_message.h"

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

namespace {

bool known_fed_type(uint32_t t) {
  switch (static_cast<FedType>(t)) {
    case FedType::kHello:
    case FedType::kUpdate:
    case FedType::kTrain:
    case FedType::kStop:
    case FedType::kSecAgg:
    case FedType::kSecAggServer:
      return true;
  }
  return false;
}

}  // namespace

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
  const std::optional<FedHeader> header = read_framed_header<FedHeader>(
      frames, kFedMagic, kFedVersion, known_fed_type, expected_tag, max_values, 3, why);
  if (!header) return std::nullopt;
  FedMessage m;
  m.header = *header;
  const FedHeader& h = m.header;
  const auto type = static_cast<FedType>(h.type);
  const bool secagg = type == FedType::kSecAgg || type == FedType::kSecAggServer;
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
