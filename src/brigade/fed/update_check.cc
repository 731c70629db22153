#include "brigade/fed/update_check.h"

#include <fmt/format.h>

#include <cmath>

namespace brigade {

namespace {

int64_t non_finite(const float* values, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += std::isfinite(values[i]) ? 0 : 1;
  return bad;
}

}  // namespace

std::string update_refusal(const FedMessage& message, int peer, const RoundInProgress& round) {
  const FedHeader& h = message.header;
  if (static_cast<FedType>(h.type) != FedType::kUpdate) {
    return fmt::format("a {} message where updates are expected",
                       fed_type_name(static_cast<FedType>(h.type)));
  }
  if (static_cast<int>(h.client) != peer) {
    return fmt::format("it claims to be client {} but its key is client {}'s", h.client, peer);
  }
  if (h.round != round.round || h.attempt != round.attempt) {
    return fmt::format(
        "it answers round {} attempt {}, the coordinator collects round {} attempt {}", h.round + 1,
        h.attempt + 1, round.round + 1, round.attempt + 1);
  }
  if (!round.asked.count(peer)) return "the client was not asked this round";
  if (round.answered.count(peer)) return "the client already answered this round";
  if (h.count != round.values) {
    return fmt::format("{} values, the model has {}", h.count, round.values);
  }
  if ((h.controls == 1) != round.scaffold) {
    return round.scaffold ? "no control-variate change (SCAFFOLD needs one)"
                          : "a control-variate change the strategy does not use";
  }
  if (h.samples < 1 || h.samples > kMaxClientSamples) {
    return fmt::format("{} examples (allowed: 1 to {})", h.samples, kMaxClientSamples);
  }
  if (h.steps < 1) return "no local step taken";
  if (const int64_t bad = non_finite(message.model, h.count); bad > 0) {
    return fmt::format("{} non-finite values in the update", bad);
  }
  if (round.scaffold) {
    if (const int64_t bad = non_finite(message.control, h.count); bad > 0) {
      return fmt::format("{} non-finite values in the control-variate change", bad);
    }
  }
  return "";
}

}  // namespace brigade
