#include "brigade/fed/secagg/protocol.h"

#include <fmt/format.h>

#include <algorithm>

namespace brigade::secagg {

bool validate_round_params(const RoundParams& params, std::string* why) {
  if (!validate_fixed_point(params.fixed, why)) return false;
  const int64_t most = std::min<int64_t>(kMaxClients, params.fixed.max_clients);
  if (params.threshold < 2 || params.threshold > most) {
    return detail::refuse(why, fmt::format("secure aggregation: threshold = {} (2 to {}, the "
                                           "fewer of {} and fixed.max_clients)",
                                           params.threshold, most, kMaxClients));
  }
  if (params.length < 1 || params.length > kMaxValues) {
    return detail::refuse(
        why, fmt::format("secure aggregation: length = {} (1 to {})", params.length, kMaxValues));
  }
  if (params.id.round < 0 || params.id.attempt < 0) {
    return detail::refuse(why, fmt::format("secure aggregation: round {} attempt {} (both >= 0)",
                                           params.id.round, params.id.attempt));
  }
  return true;
}

namespace detail {

bool refuse(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return false;
}

uint8_t share_number(const Roster& roster, uint32_t client) {
  const auto it = std::lower_bound(roster.clients.begin(), roster.clients.end(), client,
                                   [](const KeyAdvert& a, uint32_t c) { return a.client < c; });
  if (it == roster.clients.end() || it->client != client) return 0;
  return static_cast<uint8_t>(1 + (it - roster.clients.begin()));
}

}  // namespace detail
}  // namespace brigade::secagg
