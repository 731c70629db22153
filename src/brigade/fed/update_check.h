#pragma once
// Whether a client's answer may join the round the coordinator is collecting: the message is
// already decoded and bounded (fed_message.h); this checks what it means.
#include <cstdint>
#include <set>
#include <string>

#include "brigade/fed/fed_message.h"

namespace brigade {

struct RoundInProgress {
  int64_t round = 0;
  int64_t attempt = 0;
  int64_t values = 0;     // the model's parameter count
  bool scaffold = false;  // answers carry a control-variate change
  std::set<int> asked;    // clients sent this attempt's kTrain
  std::set<int> answered;
};

// The largest example count a client may claim: FedAvg weights by it, so an absurd count would
// let one client outweigh the federation.
inline constexpr int64_t kMaxClientSamples = int64_t{1} << 40;

// "" when the update from `peer` (the client its connection's key belongs to) joins `round`;
// otherwise why not, for the log ("round 3 attempt 0 is over", "2 non-finite values", ...).
std::string update_refusal(const FedMessage& message, int peer, const RoundInProgress& round);

}  // namespace brigade
