#pragma once
// One client's side of one secure-aggregation round (Bonawitz et al. 2017; the protocol and its
// terms are in protocol.h). A state machine, one object per round, called in order:
//
//   create -> advert() -> share_keys(roster) -> mask_update(inbox, x) -> unmask(request)
//
// Each step takes what the server sent (decoded by wire.h, or built in-process) and returns what
// to send back. Everything from the server is checked first; a refused input (nullopt, with *why)
// changes nothing, so the step may be tried again with a correct one. Secrets are wiped as soon
// as the round no longer needs them, and all of them when the object goes.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "brigade/fed/secagg/protocol.h"
#include "brigade/fed/secagg/sealed_share.h"
#include "brigade/fed/secagg/secret.h"

namespace brigade::secagg {

class SecAggClient {
 public:
  // A client `self` for the round of `params`, with fresh key pairs. nullptr (and why) when the
  // params are unusable or libsodium cannot start.
  static std::unique_ptr<SecAggClient> create(const RoundParams& params, uint32_t self,
                                              std::string* why);
  SecAggClient(const SecAggClient&) = delete;
  SecAggClient& operator=(const SecAggClient&) = delete;

  // Step 1: this client's public keys.
  const KeyAdvert& advert() const { return advert_; }

  // Step 2: splits s_sk and a fresh self-mask seed among the roster and seals each other client
  // its shares. Refuses a roster that is not sorted and unique, is smaller than the threshold or
  // larger than the round allows, lacks this client or its keys, or holds a key of small order.
  std::optional<ShareBundle> share_keys(const Roster& roster, std::string* why);

  // Step 3: opens the shares sent to this client (U2 = their senders and this client), quantises
  // the update (params.length f32 values; fixed_point.h) and masks it. Refuses an inbox that is
  // for another client, has a share from outside the roster or twice from one sender, a share
  // that does not open or is bound to another round or pair, or leaves U2 below the threshold;
  // and a non-finite update value.
  std::optional<MaskedInput> mask_update(const ShareInbox& inbox, const float* update, int64_t n,
                                         std::string* why);
  // As mask_update, for an update already in fixed point (n values).
  std::optional<MaskedInput> mask_fixed(const ShareInbox& inbox, const uint32_t* fixed, int64_t n,
                                        std::string* why);
  // How many update values mask_update clipped.
  int64_t clipped_values() const { return clipped_; }

  // Step 4: reveals its share of b_v for each survivor v and of s_sk_v for each dropped v.
  // Answers once per round, and refuses a request that names a client as both survivor and
  // dropped, names fewer survivors than the threshold or omits this client from them, or does
  // not split this client's U2 exactly.
  std::optional<UnmaskReply> unmask(const UnmaskRequest& request, std::string* why);

 private:
  SecAggClient(const RoundParams& params, uint32_t self);
  bool check_roster(const Roster& roster, std::string* why) const;

  struct HeldShares {
    uint32_t owner = 0;
    SharePair shares;
  };
  bool open_inbox(const ShareInbox& inbox, std::vector<HeldShares>* held, std::string* why) const;
  void wipe_masking_secrets();

  enum class Step { kAdvertised, kShared, kMasked, kDone };

  RoundParams params_;
  uint32_t self_ = 0;
  Step step_ = Step::kAdvertised;
  KeyAdvert advert_;
  SecretKey c_sk_;
  SecretKey s_sk_;
  Seed self_seed_;                // b_self
  Roster roster_;                 // U1, from step 2
  std::vector<Seed> pair_seeds_;  // s_{self,v} for roster_.clients[i] (unused for self)
  SharePair own_shares_;          // this client's shares of its own secrets
  std::vector<HeldShares> held_;  // step 3 on: U2's shares, sorted by owner
  int64_t clipped_ = 0;
};

}  // namespace brigade::secagg
