#pragma once
// The server's side of one secure-aggregation round (Bonawitz et al. 2017; the protocol and its
// terms are in protocol.h). A state machine, one object per round: for each step the coordinator
// hands it every client message that arrives (receive_*), then closes the step when it stops
// waiting (its deadline, or everyone answered) and sends what the close returns:
//
//   receive_advert*         -> close_advertising -> Roster to every client of U1
//   receive_shares*         -> close_sharing     -> a ShareInbox to each client of U2
//   receive_masked_input*   -> close_masking     -> UnmaskRequest to every survivor (U3)
//   receive_unmask_reply*   -> finish            -> the sum of U3's updates
//
// A message is checked before it counts (from a client of the step's set, once, the right
// shape); a refused one returns false with why and changes nothing. A close that has too few
// clients (fewer than the threshold) refuses and may be called again once more have come; so
// may finish, which never returns a sum it could not check: every rebuilt secret is compared
// with its commitment or public key.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "brigade/fed/secagg/protocol.h"

namespace brigade::secagg {

struct SecAggSum {
  std::vector<uint32_t> clients;  // U3: the clients whose updates the sum holds, sorted
  std::vector<uint32_t> fixed;    // sum_{u in U3} x_u mod 2^32 (params.length values)
  std::vector<float> values;      // fixed read back as reals (fixed_point.h)
};

class SecAggServer {
 public:
  // nullptr (and why) when params are unusable or libsodium cannot start.
  static std::unique_ptr<SecAggServer> create(const RoundParams& params, std::string* why);
  SecAggServer(const SecAggServer&) = delete;
  SecAggServer& operator=(const SecAggServer&) = delete;
  ~SecAggServer();

  // Step 1. Refuses a second advert of a client, a key of small order, and a roster past
  // min(255, fixed.max_clients).
  bool receive_advert(const KeyAdvert& advert, std::string* why);
  // U1: at least the threshold of clients.
  std::optional<Roster> close_advertising(std::string* why);

  // Step 2. Refuses a bundle from outside U1, a second one, and one without exactly one share
  // for every other client of U1.
  bool receive_shares(const ShareBundle& bundle, std::string* why);
  // U2: at least the threshold; one inbox per client of U2, sorted by recipient.
  std::optional<std::vector<ShareInbox>> close_sharing(std::string* why);

  // Step 3. Refuses an input from outside U2, a second one, and one of the wrong length.
  bool receive_masked_input(const MaskedInput& input, std::string* why);
  // U3: at least the threshold.
  std::optional<UnmaskRequest> close_masking(std::string* why);

  // Step 4. Refuses a reply from outside U3, a second one, and one whose share lists do not
  // follow the request.
  bool receive_unmask_reply(const UnmaskReply& reply, std::string* why);
  // Needs replies from at least the threshold of survivors.
  std::optional<SecAggSum> finish(std::string* why);

  const Roster& roster() const { return roster_; }  // U1, once advertising is closed

 private:
  enum class Step { kAdvertising, kSharing, kMasking, kUnmasking, kDone };

  explicit SecAggServer(const RoundParams& params) : params_(params) {}
  bool at_step(Step step, const char* what, std::string* why) const;
  bool rebuild(const std::vector<const UnmaskReply*>& replies, bool key, size_t index,
               uint8_t* secret, std::string* why) const;
  void wipe_replies();

  RoundParams params_;
  Step step_ = Step::kAdvertising;
  std::map<uint32_t, KeyAdvert> adverts_;
  Roster roster_;  // U1
  std::map<uint32_t, ShareBundle> bundles_;
  std::vector<uint32_t> sharers_;           // U2, sorted
  std::map<uint32_t, Digest> commitments_;  // of b_u, for u in U2
  std::set<uint32_t> masked_;               // U3 so far
  std::vector<uint32_t> masked_sum_;        // sum of their y_u
  UnmaskRequest request_;
  std::map<uint32_t, UnmaskReply> replies_;
};

}  // namespace brigade::secagg
