#include "brigade/fed/secagg/secagg_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "brigade/fed/secagg/masking.h"
#include "brigade/fed/secagg/secret.h"
#include "brigade/fed/secagg/shamir.h"
#include "brigade/fed/secagg/sodium_init.h"

namespace brigade::secagg {
namespace {

template <typename T>
std::optional<T> refused(std::string* why, std::string reason) {
  detail::refuse(why, std::move(reason));
  return std::nullopt;
}

bool contains(const std::vector<uint32_t>& sorted, uint32_t c) {
  return std::binary_search(sorted.begin(), sorted.end(), c);
}

bool same_owners(const std::vector<RevealedShare>& shares, const std::vector<uint32_t>& owners) {
  if (shares.size() != owners.size()) return false;
  for (size_t i = 0; i < owners.size(); ++i) {
    if (shares[i].owner != owners[i]) return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<SecAggServer> SecAggServer::create(const RoundParams& params, std::string* why) {
  if (!validate_round_params(params, why) || !sodium_ready(why)) return nullptr;
  return std::unique_ptr<SecAggServer>(new SecAggServer(params));
}

SecAggServer::~SecAggServer() {
  wipe_replies();
}

bool SecAggServer::at_step(Step step, const char* what, std::string* why) const {
  static constexpr const char* kNames[] = {"advertising", "sharing", "masking", "unmasking",
                                           "done"};
  if (step_ == step) return true;
  return detail::refuse(
      why, fmt::format("{} while the round is {} (it belongs to {})", what,
                       kNames[static_cast<int>(step_)], kNames[static_cast<int>(step)]));
}

bool SecAggServer::receive_advert(const KeyAdvert& advert, std::string* why) {
  if (!at_step(Step::kAdvertising, "key advert", why)) return false;
  const size_t most = std::min<int64_t>(kMaxClients, params_.fixed.max_clients);
  if (adverts_.count(advert.client)) {
    return detail::refuse(why, fmt::format("client {} advertised keys twice", advert.client));
  }
  if (adverts_.size() >= most) {
    return detail::refuse(
        why, fmt::format("client {}: the roster is full ({} clients)", advert.client, most));
  }
  if (!usable_public_key(advert.c_pk) || !usable_public_key(advert.s_pk)) {
    return detail::refuse(why,
                          fmt::format("client {} advertised a key of small order", advert.client));
  }
  adverts_.emplace(advert.client, advert);
  return true;
}

std::optional<Roster> SecAggServer::close_advertising(std::string* why) {
  if (!at_step(Step::kAdvertising, "close advertising", why)) return std::nullopt;
  if (adverts_.size() < static_cast<size_t>(params_.threshold)) {
    return refused<Roster>(why, fmt::format("{} clients advertised keys (threshold {})",
                                            adverts_.size(), params_.threshold));
  }
  for (const auto& [client, advert] : adverts_) roster_.clients.push_back(advert);
  adverts_.clear();
  step_ = Step::kSharing;
  return roster_;
}

bool SecAggServer::receive_shares(const ShareBundle& bundle, std::string* why) {
  if (!at_step(Step::kSharing, "share bundle", why)) return false;
  const uint32_t sender = bundle.sender;
  if (detail::share_number(roster_, sender) == 0) {
    return detail::refuse(why, fmt::format("shares from client {}, not in the roster", sender));
  }
  if (bundles_.count(sender)) {
    return detail::refuse(why, fmt::format("client {} sent its shares twice", sender));
  }
  if (bundle.shares.size() != roster_.clients.size() - 1) {
    return detail::refuse(why, fmt::format("client {} sent {} shares for a roster of {}", sender,
                                           bundle.shares.size(), roster_.clients.size()));
  }
  std::vector<bool> seen(roster_.clients.size() + 1, false);
  for (const SealedShare& s : bundle.shares) {
    const uint8_t number = detail::share_number(roster_, s.recipient);
    if (s.sender != sender) {
      return detail::refuse(
          why, fmt::format("client {}'s bundle holds a share from client {}", sender, s.sender));
    }
    if (number == 0 || s.recipient == sender || seen[number]) {
      return detail::refuse(why,
                            fmt::format("client {}'s bundle has a share for client {}, who "
                                        "is not in the roster, is the sender or has one already",
                                        sender, s.recipient));
    }
    seen[number] = true;
  }
  bundles_.emplace(sender, bundle);
  return true;
}

std::optional<std::vector<ShareInbox>> SecAggServer::close_sharing(std::string* why) {
  if (!at_step(Step::kSharing, "close sharing", why)) return std::nullopt;
  if (bundles_.size() < static_cast<size_t>(params_.threshold)) {
    return refused<std::vector<ShareInbox>>(
        why, fmt::format("{} clients sent their shares (threshold {})", bundles_.size(),
                         params_.threshold));
  }
  for (const auto& [sender, bundle] : bundles_) {
    sharers_.push_back(sender);
    commitments_.emplace(sender, bundle.seed_commitment);
  }
  std::vector<ShareInbox> inboxes(sharers_.size());
  for (size_t i = 0; i < sharers_.size(); ++i) inboxes[i].recipient = sharers_[i];
  // Shares for clients outside U2 stay behind: nobody will mask with or reveal for them.
  for (const auto& [sender, bundle] : bundles_) {
    for (const SealedShare& s : bundle.shares) {
      const auto it = std::lower_bound(sharers_.begin(), sharers_.end(), s.recipient);
      if (it != sharers_.end() && *it == s.recipient) {
        inboxes[it - sharers_.begin()].shares.push_back(s);
      }
    }
  }
  bundles_.clear();
  masked_sum_.assign(static_cast<size_t>(params_.length), 0);
  step_ = Step::kMasking;
  return inboxes;
}

bool SecAggServer::receive_masked_input(const MaskedInput& input, std::string* why) {
  if (!at_step(Step::kMasking, "masked input", why)) return false;
  if (!contains(sharers_, input.client)) {
    return detail::refuse(
        why, fmt::format("a masked input from client {}, who did not share", input.client));
  }
  if (masked_.count(input.client)) {
    return detail::refuse(why, fmt::format("client {} sent its masked input twice", input.client));
  }
  if (input.masked.size() != static_cast<size_t>(params_.length)) {
    return detail::refuse(why, fmt::format("client {} sent {} values (the round's have {})",
                                           input.client, input.masked.size(), params_.length));
  }
  for (size_t i = 0; i < masked_sum_.size(); ++i) masked_sum_[i] += input.masked[i];
  masked_.insert(input.client);
  return true;
}

std::optional<UnmaskRequest> SecAggServer::close_masking(std::string* why) {
  if (!at_step(Step::kMasking, "close masking", why)) return std::nullopt;
  if (masked_.size() < static_cast<size_t>(params_.threshold)) {
    return refused<UnmaskRequest>(
        why, fmt::format("{} masked inputs arrived (threshold {}): the round cannot be unmasked",
                         masked_.size(), params_.threshold));
  }
  request_.survivors.assign(masked_.begin(), masked_.end());
  for (const uint32_t c : sharers_) {
    if (!masked_.count(c)) request_.dropped.push_back(c);
  }
  step_ = Step::kUnmasking;
  return request_;
}

bool SecAggServer::receive_unmask_reply(const UnmaskReply& reply, std::string* why) {
  if (!at_step(Step::kUnmasking, "unmask reply", why)) return false;
  if (!contains(request_.survivors, reply.client)) {
    return detail::refuse(
        why, fmt::format("an unmask reply from client {}, not a survivor", reply.client));
  }
  if (replies_.count(reply.client)) {
    return detail::refuse(why, fmt::format("client {} sent its unmask reply twice", reply.client));
  }
  if (!same_owners(reply.seed_shares, request_.survivors) ||
      !same_owners(reply.key_shares, request_.dropped)) {
    return detail::refuse(
        why, fmt::format("client {}'s unmask reply does not follow the request "
                         "({} seed and {} key shares for {} survivors and {} "
                         "dropped)",
                         reply.client, reply.seed_shares.size(), reply.key_shares.size(),
                         request_.survivors.size(), request_.dropped.size()));
  }
  replies_.emplace(reply.client, reply);
  return true;
}

// Rebuilds the secret of the index-th survivor (key false: its self-mask seed) or dropped client
// (key true: its s secret key) from the replies' shares.
bool SecAggServer::rebuild(const std::vector<const UnmaskReply*>& replies, bool key, size_t index,
                           uint8_t* secret, std::string* why) const {
  const size_t k = replies.size();
  std::vector<uint8_t> numbers(k);
  SecretBuffer shares(k * 32);
  for (size_t r = 0; r < k; ++r) {
    numbers[r] = detail::share_number(roster_, replies[r]->client);
    const auto& list = key ? replies[r]->key_shares : replies[r]->seed_shares;
    std::memcpy(shares.data() + r * 32, list[index].share.data(), 32);
  }
  return shamir_combine(numbers, {shares.data(), k * 32}, params_.threshold, {secret, 32}, why);
}

std::optional<SecAggSum> SecAggServer::finish(std::string* why) {
  if (!at_step(Step::kUnmasking, "finish", why)) return std::nullopt;
  if (replies_.size() < static_cast<size_t>(params_.threshold)) {
    return refused<SecAggSum>(
        why, fmt::format("{} of {} survivors revealed their shares (threshold {}): the round "
                         "cannot be unmasked",
                         replies_.size(), request_.survivors.size(), params_.threshold));
  }
  std::vector<const UnmaskReply*> replies;
  for (const auto& [client, reply] : replies_) replies.push_back(&reply);
  const int64_t n = params_.length;
  const auto& survivors = request_.survivors;
  const auto& dropped = request_.dropped;
  auto advert_of = [&](uint32_t c) -> const KeyAdvert& {
    return roster_.clients[detail::share_number(roster_, c) - 1];
  };

  SecAggSum out;
  out.clients = survivors;
  out.fixed = masked_sum_;
  std::vector<uint32_t> scratch;
  bool ok = true;
  for (size_t j = 0; ok && j < dropped.size(); ++j) {
    const KeyAdvert& v = advert_of(dropped[j]);
    SecretKey s_sk;
    ok = rebuild(replies, true, j, s_sk.data(), why);
    if (ok && public_key_of(s_sk) != v.s_pk) {
      ok = detail::refuse(why, fmt::format("the revealed shares of dropped client {}'s key do not "
                                           "rebuild it (a corrupted share)",
                                           v.client));
    }
    // y_u holds +/- PRG(s_uv) for this dropped v: take the same sign off again.
    for (size_t i = 0; ok && i < survivors.size(); ++i) {
      const KeyAdvert& u = advert_of(survivors[i]);
      Seed seed;
      ok = pairwise_seed(s_sk, v.s_pk, v.client, u.s_pk, u.client, params_.id, &seed, why);
      if (ok) {
        const MaskSign in_y = pairwise_sign(u.client, v.client);
        apply_mask(seed, in_y == MaskSign::kAdd ? MaskSign::kSubtract : MaskSign::kAdd,
                   out.fixed.data(), n, &scratch);
      }
    }
  }
  for (size_t i = 0; ok && i < survivors.size(); ++i) {
    Seed seed;
    ok = rebuild(replies, false, i, seed.data(), why);
    if (ok && commit_seed(seed, survivors[i], params_.id) != commitments_.at(survivors[i])) {
      ok = detail::refuse(why, fmt::format("the revealed shares of client {}'s self-mask seed do "
                                           "not match its commitment (a corrupted share)",
                                           survivors[i]));
    }
    if (ok) apply_mask(seed, MaskSign::kSubtract, out.fixed.data(), n, &scratch);
  }
  wipe_mask_scratch(&scratch);
  if (!ok) return std::nullopt;

  out.values.resize(static_cast<size_t>(n));
  dequantize_sum(out.fixed.data(), n, params_.fixed, out.values.data());
  wipe_replies();
  step_ = Step::kDone;
  return out;
}

void SecAggServer::wipe_replies() {
  for (auto& [client, reply] : replies_) {
    for (RevealedShare& s : reply.seed_shares) wipe_bytes(s.share.data(), s.share.size());
    for (RevealedShare& s : reply.key_shares) wipe_bytes(s.share.data(), s.share.size());
  }
  replies_.clear();
}

}  // namespace brigade::secagg
