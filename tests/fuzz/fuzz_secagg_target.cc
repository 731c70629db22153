// The secure-aggregation messages (fed/secagg/wire.h), each decoded as the coordinator or a
// client decodes it: the header routes the bytes to the decoder of their type, against the
// round the receiver expects. A refused message is an IoError with the reason; an accepted one
// must encode back to exactly the bytes it came from (nothing read past a bound, no field
// silently dropped). The seeds are the seven messages of a real 3-client round.
#include <stdexcept>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/fed/secagg/secagg_client.h"
#include "brigade/fed/secagg/secagg_server.h"
#include "brigade/fed/secagg/wire.h"
#include "fuzz/fuzz_target.h"

namespace brigade::fuzz {

namespace {

using namespace secagg;

constexpr int64_t kLength = 6;
const RoundId kRound{.run_tag = 0xfeedull, .round = 3, .attempt = 1};

std::string as_string(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

// Every message of one round of clients 0, 1 and 2 with threshold 2.
std::vector<std::string> round_messages() {
  const RoundParams params{
      .id = kRound, .threshold = 2, .length = kLength, .fixed = {.clip = 1.0f, .max_clients = 3}};
  std::string why;
  std::unique_ptr<SecAggServer> server = SecAggServer::create(params, &why);
  std::vector<std::unique_ptr<SecAggClient>> clients;
  std::vector<std::string> out;
  for (uint32_t c = 0; c < 3; ++c) {
    clients.push_back(SecAggClient::create(params, c, &why));
    out.push_back(as_string(encode_advert(clients.back()->advert(), kRound)));
    server->receive_advert(clients.back()->advert(), &why);
  }
  const Roster roster = *server->close_advertising(&why);
  out.push_back(as_string(encode_roster(roster, kRound)));
  for (auto& c : clients) {
    const ShareBundle bundle = *c->share_keys(roster, &why);
    out.push_back(as_string(encode_share_bundle(bundle, kRound)));
    server->receive_shares(bundle, &why);
  }
  const std::vector<ShareInbox> inboxes = *server->close_sharing(&why);
  const std::vector<float> update(kLength, 0.25f);
  for (size_t c = 0; c < 2; ++c) {  // client 2 drops before masking
    out.push_back(as_string(encode_share_inbox(inboxes[c], kRound)));
    const MaskedInput masked = *clients[c]->mask_update(inboxes[c], update.data(), kLength, &why);
    out.push_back(as_string(encode_masked_input(masked, kRound)));
    server->receive_masked_input(masked, &why);
  }
  const UnmaskRequest request = *server->close_masking(&why);
  out.push_back(as_string(encode_unmask_request(request, kRound)));
  out.push_back(as_string(encode_unmask_reply(*clients[0]->unmask(request, &why), kRound)));
  return out;
}

template <typename T>
Bytes reencode(const std::optional<T>& decoded, Bytes (*encode)(const T&, const RoundId&),
               const std::string& why) {
  if (!decoded) throw IoError("secure-aggregation message: " + why);
  return encode(*decoded, kRound);
}

class SecAggMessageTarget final : public Target {
 public:
  std::vector<std::string> seeds() override { return round_messages(); }

  Outcome run(std::string_view input) override {
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(input.data()),
                                         input.size());
    std::string why;
    const std::optional<WireHeader> header = peek_header(bytes, &why);
    if (!header) throw IoError("secure-aggregation header: " + why);
    Bytes again;
    switch (header->type) {
      case SecAggType::kAdvert:
        again = reencode(decode_advert(bytes, kRound, &why), encode_advert, why);
        break;
      case SecAggType::kRoster:
        again = reencode(decode_roster(bytes, kRound, &why), encode_roster, why);
        break;
      case SecAggType::kShareBundle:
        again = reencode(decode_share_bundle(bytes, kRound, &why), encode_share_bundle, why);
        break;
      case SecAggType::kShareInbox:
        again = reencode(decode_share_inbox(bytes, kRound, &why), encode_share_inbox, why);
        break;
      case SecAggType::kMaskedInput:
        again =
            reencode(decode_masked_input(bytes, kRound, kLength, &why), encode_masked_input, why);
        break;
      case SecAggType::kUnmaskRequest:
        again = reencode(decode_unmask_request(bytes, kRound, &why), encode_unmask_request, why);
        break;
      case SecAggType::kUnmaskReply:
        again = reencode(decode_unmask_reply(bytes, kRound, &why), encode_unmask_reply, why);
        break;
    }
    if (again.size() != bytes.size() || !std::equal(again.begin(), again.end(), bytes.begin())) {
      throw std::logic_error("an accepted secure-aggregation message does not encode back");
    }
    return {.accepted = true};
  }
};

}  // namespace

std::unique_ptr<Target> make_secagg_message_target(const std::string&) {
  return std::make_unique<SecAggMessageTarget>();
}

}  // namespace brigade::fuzz
