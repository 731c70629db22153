// The coordinator's side of a secure-aggregation round (fed/secagg/protocol.h): the clients
// train, then advertise keys, share them, send masked updates and help unmask the sum. Each step
// waits for the clients still in the round, up to fed.round_deadline_s for the first (it
// includes the training) and fed.secagg_step_s for the others; a step with fewer than the
// threshold fails the attempt, which the round loop retries like any other.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "brigade/fed/coordinator.h"
#include "brigade/fed/secagg/secagg_server.h"
#include "brigade/fed/secagg/wire.h"

namespace brigade {

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// The threshold of a round that asked `asked` clients: a majority, so that the two halves of
// one client's secrets can never both reach it (protocol.h), and at least 2.
int64_t default_threshold(size_t asked) {
  return std::max<int64_t>(2, static_cast<int64_t>(asked) / 2 + 1);
}

}  // namespace

std::map<int, Coordinator::Answer> Coordinator::collect_secure(int64_t round, int64_t attempt,
                                                               const std::vector<int>& asked,
                                                               int64_t* bytes_down,
                                                               int64_t* bytes_up) {
  const FedConfig& fed = setup_.fed;
  const int64_t threshold =
      fed.secagg_threshold > 0 ? fed.secagg_threshold : default_threshold(asked.size());
  const secagg::RoundId id{.run_tag = setup_.run_tag, .round = round, .attempt = attempt};
  const secagg::RoundParams params{
      .id = id,
      .threshold = static_cast<int>(threshold),
      .length = n_,
      .fixed = {.clip = static_cast<float>(fed.secagg_clip), .max_clients = setup_.clients}};
  std::string why;
  std::unique_ptr<secagg::SecAggServer> server = secagg::SecAggServer::create(params, &why);
  if (!server) {
    log_.info("round {} attempt {}: secure aggregation cannot start: {}", round + 1, attempt + 1,
              why);
    return {};
  }
  const auto start = Clock::now();
  std::set<int> in_round = send_train(round, attempt, asked, threshold, bytes_down);
  std::map<int, Answer> answers;

  auto send_step = [&](int client, const secagg::Bytes& bytes) {
    FedHeader h;
    h.type = static_cast<uint32_t>(FedType::kSecAggServer);
    h.client = static_cast<uint32_t>(client);
    h.run_tag = setup_.run_tag;
    h.round = round;
    h.attempt = attempt;
    zmq::multipart_t frames = encode_fed_secagg(h, bytes);
    *bytes_down += static_cast<int64_t>(sizeof h + bytes.size());
    if (!connected_.count(client) || !socket_.send(connected_.at(client), std::move(frames))) {
      in_round.erase(client);
    }
  };
  // Receives the step `type` from every client in `expected` until the deadline; `take` feeds
  // one decoded step to the server and says whether it was accepted. Returns who was.
  auto gather = [&](const std::set<int>& expected, secagg::SecAggType type,
                    Clock::time_point deadline, auto&& take) {
    std::set<int> done, failed;
    while (done.size() + failed.size() < expected.size() && Clock::now() < deadline &&
           !setup_.stop_requested()) {
      int malformed_from = -1;
      std::optional<Incoming> in = receive_before(deadline, &malformed_from);
      if (!in) {
        if (expected.count(malformed_from) && !done.count(malformed_from)) {
          failed.insert(malformed_from);  // its step, refused: it sends no other
        }
        continue;
      }
      const int peer = in->peer;
      FedMessage& m = in->message;
      const FedHeader& h = m.header;
      if (static_cast<FedType>(h.type) != FedType::kSecAgg || h.round != round ||
          h.attempt != attempt) {
        refuse(peer, fmt::format("a {} message for round {} attempt {} during a secure round",
                                 fed_type_name(static_cast<FedType>(h.type)), h.round + 1,
                                 h.attempt + 1));
        continue;
      }
      if (static_cast<int>(h.client) != peer || !expected.count(peer) || done.count(peer) ||
          failed.count(peer)) {
        refuse(peer, "a secure-aggregation step from a client not expected at this step");
        continue;
      }
      std::optional<secagg::WireHeader> wire = secagg::peek_header(m.secagg, &why);
      if (!wire || wire->type != type || wire->client != static_cast<uint32_t>(peer)) {
        refuse(peer, wire ? fmt::format("a {} where a {} is expected",
                                        secagg::secagg_type_name(wire->type),
                                        secagg::secagg_type_name(type))
                          : why);
        failed.insert(peer);
        continue;
      }
      if (!take(peer, m)) {
        refuse(peer, why);
        failed.insert(peer);
        continue;
      }
      *bytes_up += in->bytes;
      done.insert(peer);
    }
    return done;
  };
  auto fail = [&](const char* step) {
    log_.info("round {} attempt {}: secure aggregation stopped at {}: {}", round + 1, attempt + 1,
              step, why);
    return std::map<int, Answer>{};
  };

  // 1. Training, then keys.
  const std::set<int> advertised = gather(
      in_round, secagg::SecAggType::kAdvert, after(fed.round_deadline_s),
      [&](int peer, FedMessage& m) {
        std::optional<secagg::KeyAdvert> advert = secagg::decode_advert(m.secagg, id, &why);
        if (!advert || !server->receive_advert(*advert, &why)) return false;
        FedMessage stats;
        stats.header = m.header;
        answers.emplace(
            peer, Answer{.message = std::move(stats),
                         .seconds = std::chrono::duration<double>(Clock::now() - start).count()});
        return true;
      });
  std::optional<secagg::Roster> roster = server->close_advertising(&why);
  if (!roster) return fail("advertising");
  const secagg::Bytes roster_bytes = secagg::encode_roster(*roster, id);
  for (int client : advertised) send_step(client, roster_bytes);

  // 2. Shares.
  gather(advertised, secagg::SecAggType::kShareBundle, after(fed.secagg_step_s),
         [&](int, FedMessage& m) {
           std::optional<secagg::ShareBundle> bundle =
               secagg::decode_share_bundle(m.secagg, id, &why);
           return bundle && server->receive_shares(*bundle, &why);
         });
  std::optional<std::vector<secagg::ShareInbox>> inboxes = server->close_sharing(&why);
  if (!inboxes) return fail("sharing");
  std::set<int> shared;
  for (const secagg::ShareInbox& inbox : *inboxes) {
    const int client = static_cast<int>(inbox.recipient);
    shared.insert(client);
    send_step(client, secagg::encode_share_inbox(inbox, id));
  }

  // 3. Masked updates.
  gather(shared, secagg::SecAggType::kMaskedInput, after(fed.secagg_step_s),
         [&](int, FedMessage& m) {
           std::optional<secagg::MaskedInput> input =
               secagg::decode_masked_input(m.secagg, id, n_, &why);
           return input && server->receive_masked_input(*input, &why);
         });
  std::optional<secagg::UnmaskRequest> request = server->close_masking(&why);
  if (!request) return fail("masking");
  const secagg::Bytes request_bytes = secagg::encode_unmask_request(*request, id);
  for (uint32_t client : request->survivors) send_step(static_cast<int>(client), request_bytes);

  // 4. Unmasking.
  const std::set<int> survivors(request->survivors.begin(), request->survivors.end());
  gather(survivors, secagg::SecAggType::kUnmaskReply, after(fed.secagg_step_s),
         [&](int, FedMessage& m) {
           std::optional<secagg::UnmaskReply> reply =
               secagg::decode_unmask_reply(m.secagg, id, &why);
           return reply && server->receive_unmask_reply(*reply, &why);
         });
  std::optional<secagg::SecAggSum> sum = server->finish(&why);
  if (!sum) return fail("unmasking");
  std::memcpy(delta_.data(), sum->values.data(), sizeof(float) * static_cast<size_t>(n_));
  std::map<int, Answer> out;
  for (uint32_t client : sum->clients) {
    auto it = answers.find(static_cast<int>(client));
    if (it != answers.end()) out.emplace(it->first, std::move(it->second));
  }
  if (!request->dropped.empty()) {
    log_.info("round {}: {} client(s) dropped after sharing their keys; their masks were removed",
              round + 1, request->dropped.size());
  }
  return out;
}

}  // namespace brigade
