#pragma once
// Byte layouts of the secure-aggregation messages (protocol.h), one message per ZeroMQ frame.
// Little-endian, fixed-size fields, every count bounded by what the protocol allows:
//
//   header (40)   magic "BSA1" u32 | version u32 | type u32 | client u32 | run_tag u64 |
//                 round i64 | attempt i64     (client: the sender, or the recipient of an
//                                              inbox; 0 for a roster or an unmask request)
//   advert        c_pk (32) | s_pk (32)
//   roster        count u32 (<= 255) | count x (client u32 | c_pk (32) | s_pk (32))
//   share bundle  seed_commitment (32) | count u32 (<= 254) | count x (recipient u32 | box (140))
//   share inbox   count u32 (<= 254) | count x (sender u32 | box (140))
//   masked input  count u32 (= the round's length) | count x u32
//   unmask req.   count u32 (<= 255) | count x survivor u32 | count u32 (<= 255) | count x u32
//   unmask reply  count u32 (<= 255) | count x (owner u32 | share (32))   (self-mask seeds)
//                 count u32 (<= 255) | count x (owner u32 | share (32))   (mask-agreement keys)
//
// A decoder checks the header against the round it expects and the size against the counts
// before it allocates anything; what the contents mean (a roster sorted, a share for this
// client) is the state machines' to check. Failures return nullopt and say why.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "brigade/fed/secagg/protocol.h"

namespace brigade::secagg {

enum class SecAggType : uint32_t {
  kAdvert = 1,         // client -> server
  kRoster = 2,         // server -> client
  kShareBundle = 3,    // client -> server
  kShareInbox = 4,     // server -> client
  kMaskedInput = 5,    // client -> server
  kUnmaskRequest = 6,  // server -> client
  kUnmaskReply = 7,    // client -> server
};
const char* secagg_type_name(SecAggType type);

inline constexpr uint32_t kSecAggMagic = 0x31415342;  // "BSA1"
inline constexpr uint32_t kSecAggVersion = 1;
inline constexpr size_t kHeaderBytes = 40;

struct WireHeader {
  SecAggType type = SecAggType::kAdvert;
  uint32_t client = 0;
  RoundId id;
};

// Reads the header of a message (magic, version and a known type checked) to route it; the
// body is not looked at.
std::optional<WireHeader> peek_header(std::span<const uint8_t> bytes, std::string* why);

using Bytes = std::vector<uint8_t>;

Bytes encode_advert(const KeyAdvert& advert, const RoundId& id);
std::optional<KeyAdvert> decode_advert(std::span<const uint8_t> bytes, const RoundId& expected,
                                       std::string* why);

Bytes encode_roster(const Roster& roster, const RoundId& id);
std::optional<Roster> decode_roster(std::span<const uint8_t> bytes, const RoundId& expected,
                                    std::string* why);

Bytes encode_share_bundle(const ShareBundle& bundle, const RoundId& id);
std::optional<ShareBundle> decode_share_bundle(std::span<const uint8_t> bytes,
                                               const RoundId& expected, std::string* why);

Bytes encode_share_inbox(const ShareInbox& inbox, const RoundId& id);
std::optional<ShareInbox> decode_share_inbox(std::span<const uint8_t> bytes,
                                             const RoundId& expected, std::string* why);

Bytes encode_masked_input(const MaskedInput& input, const RoundId& id);
// length: the round's update length, the only count accepted.
std::optional<MaskedInput> decode_masked_input(std::span<const uint8_t> bytes,
                                               const RoundId& expected, int64_t length,
                                               std::string* why);

Bytes encode_unmask_request(const UnmaskRequest& request, const RoundId& id);
std::optional<UnmaskRequest> decode_unmask_request(std::span<const uint8_t> bytes,
                                                   const RoundId& expected, std::string* why);

Bytes encode_unmask_reply(const UnmaskReply& reply, const RoundId& id);
std::optional<UnmaskReply> decode_unmask_reply(std::span<const uint8_t> bytes,
                                               const RoundId& expected, std::string* why);

}  // namespace brigade::secagg
