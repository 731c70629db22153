#pragma once
// ZeroMQ multipart messages as fuzz inputs: each frame as a 4-byte little-endian length and its
// bytes, at most kMaxFrames frames; what does not parse as a frame is one last frame. Shared by
// the targets that feed wire messages (parameter servers, the federated coordinator).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace brigade::fuzz {

inline constexpr int kMaxFrames = 4;

inline std::string frames_to_input(zmq::multipart_t&& frames) {
  std::string out;
  for (const zmq::message_t& f : frames) {
    const uint32_t n = static_cast<uint32_t>(f.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out.append(static_cast<const char*>(f.data()), f.size());
  }
  return out;
}

inline zmq::multipart_t input_to_frames(std::string_view in) {
  zmq::multipart_t frames;
  size_t at = 0;
  while (at < in.size() && frames.size() < kMaxFrames) {
    uint32_t n = 0;
    if (in.size() - at >= 4) std::memcpy(&n, in.data() + at, 4);
    if (in.size() - at < 4 || n > in.size() - at - 4 || frames.size() == kMaxFrames - 1) {
      frames.addmem(in.data() + at, in.size() - at);  // the rest as one frame
      break;
    }
    frames.addmem(in.data() + at + 4, n);
    at += 4 + n;
  }
  return frames;
}

}  // namespace brigade::fuzz
