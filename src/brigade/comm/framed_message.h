#pragma once
// The framing that brigade's ZeroMQ protocols share (parameter servers: sync/ps/ps_message.h;
// federated learning: fed/fed_message.h): a multipart message whose first frame is a fixed-size
// header struct, starting with magic, version and type and carrying the job's run tag and the
// count of f32 values in the frames after it. Each protocol checks its own types and fields;
// this checks what they have in common, in the same order and with the same reasons.
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <zmq_addon.hpp>

namespace brigade {

// The header of frames[0], or nullopt with *why saying what is wrong: a frame count outside
// [1, max_frames], a header of the wrong size, the wrong magic or version, a type that
// known_type refuses, another run's tag, or a count outside [0, max_values]. Header needs the
// fields magic, version, type, run_tag and count.
template <typename Header, typename KnownType>
std::optional<Header> read_framed_header(const zmq::multipart_t& frames, uint32_t magic,
                                         uint32_t version, KnownType known_type,
                                         uint64_t expected_tag, int64_t max_values,
                                         size_t max_frames, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<Header> {
    *why = std::move(reason);
    return std::nullopt;
  };
  if (frames.empty() || frames.size() > max_frames) {
    return fail(fmt::format("{} frames (a message has 1 to {})", frames.size(), max_frames));
  }
  const zmq::message_t& head = frames[0];
  if (head.size() != sizeof(Header)) {
    return fail(fmt::format("a header of {} bytes (expected {})", head.size(), sizeof(Header)));
  }
  Header h;
  std::memcpy(&h, head.data(), sizeof(Header));
  if (h.magic != magic) return fail(fmt::format("bad magic 0x{:08x}", h.magic));
  if (h.version != version) {
    return fail(fmt::format("protocol version {} (this build speaks {})", h.version, version));
  }
  if (!known_type(h.type)) return fail(fmt::format("unknown message type {}", h.type));
  if (h.run_tag != expected_tag) return fail("a message of another run (run tag differs)");
  if (h.count < 0 || h.count > max_values) {
    return fail(fmt::format("{} values (at most {} accepted)", h.count, max_values));
  }
  return h;
}

}  // namespace brigade
