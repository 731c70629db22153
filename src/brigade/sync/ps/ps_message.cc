#include "brigade/sync/ps/ps_message.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "brigade/comm/framed_message.h"

namespace brigade {

const char* ps_type_name(PsType type) {
  switch (type) {
    case PsType::kInit:
      return "init";
    case PsType::kPush:
      return "push";
    case PsType::kApply:
      return "apply";
    case PsType::kPushApply:
      return "push-apply";
    case PsType::kPull:
      return "pull";
    case PsType::kStateGet:
      return "state-get";
    case PsType::kStop:
      return "stop";
    case PsType::kJoin:
      return "join";
    case PsType::kNorm:
      return "norm";
    case PsType::kParams:
      return "params";
    case PsType::kState:
      return "state";
    case PsType::kAck:
      return "ack";
    case PsType::kJoined:
      return "joined";
  }
  return "unknown";
}

namespace {

bool known_type(uint32_t t) {
  return (t >= static_cast<uint32_t>(PsType::kInit) && t <= static_cast<uint32_t>(PsType::kJoin)) ||
         (t >= static_cast<uint32_t>(PsType::kNorm) && t <= static_cast<uint32_t>(PsType::kJoined));
}

}  // namespace

void PsStalenessRecord::add(int64_t staleness) {
  ++counts[static_cast<size_t>(std::clamp<int64_t>(staleness, 0, kBuckets - 1))];
  max = std::max(max, staleness);
  ++applied;
}

PsStalenessRecord& PsStalenessRecord::operator+=(const PsStalenessRecord& o) {
  for (int i = 0; i < kBuckets; ++i)
    counts[static_cast<size_t>(i)] += o.counts[static_cast<size_t>(i)];
  max = std::max(max, o.max);
  applied += o.applied;
  return *this;
}

zmq::multipart_t encode_ps_message(const PsHeader& header, const float* payload,
                                   const PsStalenessRecord* staleness) {
  zmq::multipart_t frames;
  frames.addmem(&header, sizeof header);
  if (header.count > 0 || staleness) {
    frames.addmem(payload, static_cast<size_t>(header.count) * sizeof(float));
  }
  if (staleness) frames.addmem(staleness, sizeof *staleness);
  return frames;
}

std::optional<PsMessage> decode_ps_message(zmq::multipart_t&& frames, uint64_t expected_tag,
                                           int64_t max_values, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<PsMessage> {
    *why = std::move(reason);
    return std::nullopt;
  };
  const std::optional<PsHeader> header = read_framed_header<PsHeader>(
      frames, kPsMagic, kPsVersion, known_type, expected_tag, max_values, 3, why);
  if (!header) return std::nullopt;
  PsMessage m;
  m.header = *header;
  const PsHeader& h = m.header;
  const size_t payload_frames = frames.size() - 1;
  if (h.count > 0 && payload_frames == 0)
    return fail(fmt::format("{} values but no payload", h.count));
  if (payload_frames >= 1 && frames[1].size() != static_cast<size_t>(h.count) * sizeof(float)) {
    return fail(fmt::format("a payload of {} bytes for {} values", frames[1].size(), h.count));
  }
  if (payload_frames == 2) {
    if (static_cast<PsType>(h.type) != PsType::kParams ||
        frames[2].size() != sizeof(PsStalenessRecord)) {
      return fail("an unexpected third frame");
    }
    PsStalenessRecord r;
    std::memcpy(&r, frames[2].data(), sizeof r);
    m.staleness = r;
  }
  for (float lr_or_scale : {h.lr, h.scale}) {
    if (!(lr_or_scale >= 0.0f && lr_or_scale <= 1e6f)) {
      return fail(fmt::format("lr or scale {} outside [0, 1e6]", lr_or_scale));
    }
  }
  if (h.clock < 0 || h.read_clock < 0 || h.updates < 0) return fail("a negative clock or count");
  m.frames = std::move(frames);
  // ZeroMQ allocates message bodies with malloc: aligned for float.
  if (m.header.count > 0) m.payload = static_cast<const float*>(m.frames[1].data());
  return m;
}

}  // namespace brigade
