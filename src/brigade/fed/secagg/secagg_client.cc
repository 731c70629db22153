#include "brigade/fed/secagg/secagg_client.h"

#include <fmt/format.h>
#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "brigade/fed/secagg/fixed_point.h"
#include "brigade/fed/secagg/masking.h"
#include "brigade/fed/secagg/shamir.h"
#include "brigade/fed/secagg/sodium_init.h"

namespace brigade::secagg {
namespace {

bool strictly_increasing(const std::vector<uint32_t>& v, const char* what, std::string* why) {
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] <= v[i - 1]) {
      return detail::refuse(
          why, fmt::format("the {} list is not sorted or names client {} twice", what, v[i]));
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<SecAggClient> SecAggClient::create(const RoundParams& params, uint32_t self,
                                                   std::string* why) {
  if (!validate_round_params(params, why) || !sodium_ready(why)) return nullptr;
  return std::unique_ptr<SecAggClient>(new SecAggClient(params, self));
}

SecAggClient::SecAggClient(const RoundParams& params, uint32_t self)
    : params_(params), self_(self) {
  advert_.client = self;
  crypto_box_keypair(advert_.c_pk.data(), c_sk_.data());
  crypto_kx_keypair(advert_.s_pk.data(), s_sk_.data());
  randombytes_buf(self_seed_.data(), self_seed_.size());
}

bool SecAggClient::check_roster(const Roster& roster, std::string* why) const {
  const auto& clients = roster.clients;
  const size_t most = std::min<int64_t>(kMaxClients, params_.fixed.max_clients);
  if (clients.size() < static_cast<size_t>(params_.threshold) || clients.size() > most) {
    return detail::refuse(why, fmt::format("a roster of {} clients (threshold {}, at most {})",
                                           clients.size(), params_.threshold, most));
  }
  for (size_t i = 1; i < clients.size(); ++i) {
    if (clients[i].client <= clients[i - 1].client) {
      return detail::refuse(
          why, fmt::format("the roster is not sorted or names client {} twice", clients[i].client));
    }
  }
  const uint8_t mine = detail::share_number(roster, self_);
  if (mine == 0) return detail::refuse(why, fmt::format("the roster lacks client {}", self_));
  const KeyAdvert& me = clients[mine - 1];
  if (me.c_pk != advert_.c_pk || me.s_pk != advert_.s_pk) {
    return detail::refuse(why,
                          fmt::format("the roster's keys for client {} are not its own", self_));
  }
  return true;
}

std::optional<ShareBundle> SecAggClient::share_keys(const Roster& roster, std::string* why) {
  if (step_ != Step::kAdvertised) {
    detail::refuse(why, "share_keys: this client has shared its keys for the round already");
    return std::nullopt;
  }
  if (!check_roster(roster, why)) return std::nullopt;
  const auto& clients = roster.clients;
  const size_t n = clients.size();

  std::vector<Seed> pair_seeds(n);
  for (size_t i = 0; i < n; ++i) {
    if (clients[i].client == self_) continue;
    std::string reason;
    if (!pairwise_seed(s_sk_, advert_.s_pk, self_, clients[i].s_pk, clients[i].client, params_.id,
                       &pair_seeds[i], &reason)) {
      detail::refuse(why, fmt::format("client {}: {}", clients[i].client, reason));
      return std::nullopt;
    }
  }

  std::vector<uint8_t> numbers(n);
  for (size_t i = 0; i < n; ++i) numbers[i] = static_cast<uint8_t>(i + 1);
  SecretBuffer key_shares(n * 32), seed_shares(n * 32);
  if (!shamir_split({s_sk_.data(), 32}, params_.threshold, numbers, {key_shares.data(), n * 32},
                    why) ||
      !shamir_split({self_seed_.data(), 32}, params_.threshold, numbers,
                    {seed_shares.data(), n * 32}, why)) {
    return std::nullopt;
  }

  ShareBundle bundle;
  bundle.sender = self_;
  bundle.seed_commitment = commit_seed(self_seed_, self_, params_.id);
  bundle.shares.reserve(n - 1);
  SharePair own;
  for (size_t i = 0; i < n; ++i) {
    SharePair pair;
    std::memcpy(pair.key_share.data(), key_shares.data() + i * 32, 32);
    std::memcpy(pair.seed_share.data(), seed_shares.data() + i * 32, 32);
    if (clients[i].client == self_) {
      own = pair;
      continue;
    }
    SealedShare sealed;
    sealed.sender = self_;
    sealed.recipient = clients[i].client;
    if (!seal_share(pair, self_, clients[i].client, params_.id, c_sk_, clients[i].c_pk, &sealed.box,
                    why)) {
      return std::nullopt;
    }
    bundle.shares.push_back(sealed);
  }

  roster_ = roster;
  pair_seeds_ = std::move(pair_seeds);
  own_shares_ = own;
  step_ = Step::kShared;
  return bundle;
}

bool SecAggClient::open_inbox(const ShareInbox& inbox, std::vector<HeldShares>* held,
                              std::string* why) const {
  if (inbox.recipient != self_) {
    return detail::refuse(
        why, fmt::format("an inbox for client {} (this is client {})", inbox.recipient, self_));
  }
  const size_t count = inbox.shares.size();
  if (count + 1 < static_cast<size_t>(params_.threshold) || count + 1 > roster_.clients.size()) {
    return detail::refuse(why,
                          fmt::format("an inbox of {} shares: with this client's own, {} of a "
                                      "roster of {} (threshold {})",
                                      count, count + 1, roster_.clients.size(), params_.threshold));
  }
  std::vector<bool> seen(roster_.clients.size() + 1, false);
  held->clear();
  held->reserve(count + 1);
  for (const SealedShare& s : inbox.shares) {
    const uint8_t number = detail::share_number(roster_, s.sender);
    if (s.recipient != self_) {
      return detail::refuse(
          why, fmt::format("a share for client {} in client {}'s inbox", s.recipient, self_));
    }
    if (number == 0) {
      return detail::refuse(why,
                            fmt::format("a share from client {}, not in the roster", s.sender));
    }
    if (s.sender == self_) return detail::refuse(why, "a share from this client to itself");
    if (seen[number]) {
      return detail::refuse(why, fmt::format("two shares from client {}", s.sender));
    }
    seen[number] = true;
    HeldShares h;
    h.owner = s.sender;
    if (!open_share(s.box, s.sender, self_, params_.id, c_sk_, roster_.clients[number - 1].c_pk,
                    &h.shares, why)) {
      return false;
    }
    held->push_back(std::move(h));
  }
  HeldShares own;
  own.owner = self_;
  own.shares = own_shares_;
  held->push_back(std::move(own));
  std::sort(held->begin(), held->end(),
            [](const HeldShares& a, const HeldShares& b) { return a.owner < b.owner; });
  return true;
}

std::optional<MaskedInput> SecAggClient::mask_update(const ShareInbox& inbox, const float* update,
                                                     int64_t n, std::string* why) {
  if (n != params_.length) {
    detail::refuse(why,
                   fmt::format("an update of {} values (the round's have {})", n, params_.length));
    return std::nullopt;
  }
  std::vector<uint32_t> fixed(static_cast<size_t>(n));
  const std::optional<int64_t> clipped = quantize(update, n, params_.fixed, fixed.data(), why);
  std::optional<MaskedInput> masked;
  if (clipped) masked = mask_fixed(inbox, fixed.data(), n, why);
  wipe_bytes(fixed.data(), fixed.size() * sizeof(uint32_t));
  if (masked) clipped_ = *clipped;
  return masked;
}

std::optional<MaskedInput> SecAggClient::mask_fixed(const ShareInbox& inbox, const uint32_t* fixed,
                                                    int64_t n, std::string* why) {
  if (step_ != Step::kShared) {
    detail::refuse(why, step_ == Step::kAdvertised
                            ? "mask: this client has not shared its keys yet"
                            : "mask: this client has masked its input for the round already");
    return std::nullopt;
  }
  if (n != params_.length) {
    detail::refuse(why,
                   fmt::format("an update of {} values (the round's have {})", n, params_.length));
    return std::nullopt;
  }
  std::vector<HeldShares> held;
  if (!open_inbox(inbox, &held, why)) return std::nullopt;

  MaskedInput out;
  out.client = self_;
  out.masked.assign(fixed, fixed + n);
  std::vector<uint32_t> scratch;
  apply_mask(self_seed_, MaskSign::kAdd, out.masked.data(), n, &scratch);
  for (const HeldShares& h : held) {
    if (h.owner == self_) continue;
    const uint8_t number = detail::share_number(roster_, h.owner);
    apply_mask(pair_seeds_[number - 1], pairwise_sign(self_, h.owner), out.masked.data(), n,
               &scratch);
  }
  wipe_mask_scratch(&scratch);

  held_ = std::move(held);
  wipe_masking_secrets();
  step_ = Step::kMasked;
  return out;
}

void SecAggClient::wipe_masking_secrets() {
  // Only the held shares are left to reveal; the keys and seeds have done their work.
  c_sk_.wipe();
  s_sk_.wipe();
  self_seed_.wipe();
  for (Seed& s : pair_seeds_) s.wipe();
  own_shares_ = SharePair{};
}

std::optional<UnmaskReply> SecAggClient::unmask(const UnmaskRequest& request, std::string* why) {
  if (step_ != Step::kMasked) {
    detail::refuse(why, step_ == Step::kDone
                            ? "unmask: this client has answered the round's unmask request "
                              "already (a second answer could reveal both secrets of a client)"
                            : "unmask: this client has not masked its input yet");
    return std::nullopt;
  }
  const auto& survivors = request.survivors;
  const auto& dropped = request.dropped;
  if (!strictly_increasing(survivors, "survivors", why) ||
      !strictly_increasing(dropped, "dropped", why)) {
    return std::nullopt;
  }
  for (const uint32_t c : dropped) {
    if (std::binary_search(survivors.begin(), survivors.end(), c)) {
      detail::refuse(why,
                     fmt::format("client {} is named both survivor and dropped: revealing both "
                                 "its shares would unmask its update",
                                 c));
      return std::nullopt;
    }
  }
  if (survivors.size() < static_cast<size_t>(params_.threshold)) {
    detail::refuse(why, fmt::format("{} survivors (threshold {}): too few to sum in private",
                                    survivors.size(), params_.threshold));
    return std::nullopt;
  }
  if (!std::binary_search(survivors.begin(), survivors.end(), self_)) {
    detail::refuse(why, fmt::format("client {} is not among the survivors it is asked as", self_));
    return std::nullopt;
  }
  auto find = [&](uint32_t owner) {
    const auto it = std::lower_bound(held_.begin(), held_.end(), owner,
                                     [](const HeldShares& h, uint32_t o) { return h.owner < o; });
    return it != held_.end() && it->owner == owner ? &*it : nullptr;
  };
  for (const auto* list : {&survivors, &dropped}) {
    for (const uint32_t c : *list) {
      if (find(c) == nullptr) {
        detail::refuse(
            why, fmt::format("client {} is named but did not share with client {}", c, self_));
        return std::nullopt;
      }
    }
  }
  if (survivors.size() + dropped.size() != held_.size()) {
    detail::refuse(why, fmt::format("the request names {} clients of this client's {} who shared",
                                    survivors.size() + dropped.size(), held_.size()));
    return std::nullopt;
  }

  UnmaskReply reply;
  reply.client = self_;
  for (const uint32_t c : survivors) {
    RevealedShare r;
    r.owner = c;
    std::memcpy(r.share.data(), find(c)->shares.seed_share.data(), 32);
    reply.seed_shares.push_back(r);
  }
  for (const uint32_t c : dropped) {
    RevealedShare r;
    r.owner = c;
    std::memcpy(r.share.data(), find(c)->shares.key_share.data(), 32);
    reply.key_shares.push_back(r);
  }
  held_.clear();
  step_ = Step::kDone;
  return reply;
}

}  // namespace brigade::secagg
