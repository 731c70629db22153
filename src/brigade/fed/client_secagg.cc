// A client's side of a secure-aggregation round (fed/secagg/protocol.h). The update leaves this
// process only masked; the coordinator's steps arrive as kSecAggServer messages and each is
// answered at once. A step that fails its checks ends this client's part in the round (the
// coordinator counts it as dropped, which the protocol survives while t others remain).
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "brigade/fed/client.h"
#include "brigade/fed/dp_mechanism.h"
#include "brigade/fed/secagg/wire.h"
#include "brigade/optim/robust_aggregate.h"

namespace brigade {

namespace {

// Test hook: BRIGADE_FAULT_SECAGG_SILENT = "client:step:round,..." makes `client` send nothing
// at `step` ("shares", "masked" or "unmask") of the first attempt of round `round` (1-based), as
// a client that drops out mid-round would. Malformed entries are ignored.
bool silent_by_fault(int client, const char* step, int64_t round, int64_t attempt) {
  const char* spec = std::getenv("BRIGADE_FAULT_SECAGG_SILENT");
  if (!spec || attempt != 0) return false;
  const std::string want = fmt::format("{}:{}:{}", client, step, round + 1);
  const std::string all = std::string(",") + spec + ",";
  return all.find("," + want + ",") != std::string::npos;
}

}  // namespace

void Client::send_secure(const std::vector<uint8_t>& bytes) {
  link_.send(encode_fed_secagg(secure_header_, bytes));
}

void Client::start_secure_round(const FedHeader& train, FedHeader stats) {
  secure_id_ = {.run_tag = setup_.run_tag, .round = train.round, .attempt = train.attempt};
  const secagg::RoundParams params{.id = secure_id_,
                                   .threshold = static_cast<int>(train.threshold),
                                   .length = n_,
                                   .fixed = {.clip = static_cast<float>(setup_.secagg_clip),
                                             .max_clients = setup_.federation_clients}};
  std::string why;
  secure_ = secagg::SecAggClient::create(params, static_cast<uint32_t>(setup_.client), &why);
  if (!secure_) {
    log_.info("round {}: secure aggregation cannot start: {}", train.round + 1, why);
    return;
  }
  // DP-FedAvg under secure aggregation is distributed: the coordinator sees no single update,
  // so each client clips its own and adds its share of the round's noise, N(0, (z C)^2 / t):
  // the sum of any t survivors (the fewest the round unmasks) carries at least the N(0, (z C)^2)
  // the accountant assumes, and no one, the coordinator included, knows the noise of the sum.
  if (setup_.dp_clip > 0) {
    bound_norm(delta_.data(), n_, setup_.dp_clip);
    if (setup_.dp_noise > 0) {
      DpMechanism share(setup_.dp_clip,
                        setup_.dp_noise / std::sqrt(static_cast<double>(train.threshold)),
                        make_dp_key());
      share.noised_sum(delta_.data(), n_, 1.0, train.round, train.attempt, delta_.data());
    }
  }
  secure_header_ = stats;
  send_secure(secagg::encode_advert(secure_->advert(), secure_id_));
  secure_header_.samples = secure_header_.steps = secure_header_.correct = secure_header_.seen = 0;
  secure_header_.loss = secure_header_.seconds = 0;
}

void Client::step_secure_round(const FedMessage& step) {
  const FedHeader& h = step.header;
  if (!secure_ || h.round != secure_id_.round || h.attempt != secure_id_.attempt ||
      h.client != static_cast<uint32_t>(setup_.client)) {
    log_.info("refused a secure-aggregation step for round {} attempt {}: not this client's round",
              h.round + 1, h.attempt + 1);
    return;
  }
  std::string why;
  std::optional<secagg::WireHeader> wire = secagg::peek_header(step.secagg, &why);
  auto abandon = [&](const char* what) {
    log_.info("round {}: leaves the secure aggregation at {}: {}", h.round + 1, what, why);
    secure_.reset();
  };
  if (!wire) return abandon("a step it cannot read");
  const char* answer = wire->type == secagg::SecAggType::kRoster       ? "shares"
                       : wire->type == secagg::SecAggType::kShareInbox ? "masked"
                                                                       : "unmask";
  if (silent_by_fault(setup_.client, answer, h.round, h.attempt)) {
    why = "BRIGADE_FAULT_SECAGG_SILENT";
    return abandon(answer);
  }
  switch (wire->type) {
    case secagg::SecAggType::kRoster: {
      std::optional<secagg::Roster> roster = secagg::decode_roster(step.secagg, secure_id_, &why);
      std::optional<secagg::ShareBundle> bundle;
      if (roster) bundle = secure_->share_keys(*roster, &why);
      if (!bundle) return abandon("sharing keys");
      return send_secure(secagg::encode_share_bundle(*bundle, secure_id_));
    }
    case secagg::SecAggType::kShareInbox: {
      std::optional<secagg::ShareInbox> inbox =
          secagg::decode_share_inbox(step.secagg, secure_id_, &why);
      std::optional<secagg::MaskedInput> masked;
      if (inbox) masked = secure_->mask_update(*inbox, delta_.data(), n_, &why);
      if (!masked) return abandon("masking");
      if (secure_->clipped_values() > 0) {
        log_.info("round {}: {} update values beyond fed.secagg_clip = {} were clipped",
                  h.round + 1, secure_->clipped_values(), setup_.secagg_clip);
      }
      return send_secure(secagg::encode_masked_input(*masked, secure_id_));
    }
    case secagg::SecAggType::kUnmaskRequest: {
      std::optional<secagg::UnmaskRequest> request =
          secagg::decode_unmask_request(step.secagg, secure_id_, &why);
      std::optional<secagg::UnmaskReply> reply;
      if (request) reply = secure_->unmask(*request, &why);
      if (!reply) return abandon("unmasking");
      send_secure(secagg::encode_unmask_reply(*reply, secure_id_));
      secure_.reset();  // the round is over for this client
      return;
    }
    default:
      why = fmt::format("a {} from the coordinator", secagg::secagg_type_name(wire->type));
      return abandon("an unexpected step");
  }
}

}  // namespace brigade
