#pragma once
// The outer exchange of DiLoCo when replicas may come and go (sync.quorum < 1): a Gloo
// collective needs every member, so a replica that stalls would stall everyone. Instead the
// pseudo-gradient payloads go through the rendezvous store (comm/store.h), and one replica, the
// coordinator (rank 0, which also writes checkpoints), decides who took part:
//
//   every replica    set  <key>/p<rank> = its payload
//   coordinator      wait up to `deadline` for all <key>/p<r>; members = those present.
//                    Fewer than required() = ceil(quorum * world)? Wait another deadline, up
//                    to `retries` times; then set <key>/members = "!" and stop (CommError).
//                    set  <key>/members = "0,1,3"   (ascending ranks)
//   every replica    get  <key>/members (store timeout), then get each member's payload and
//                    average exactly those, in rank order.
//
// Every replica, the left-out one included, applies the same members' mean to the same
// theta_global and momentum, so theta_global stays bitwise identical everywhere: a replica that
// was left out (it posted too late, or not at all yet) rejoins by taking theta_global and
// starts the next round from it. Its own pseudo-gradient of the missed round is never applied
// (nothing is applied twice, nothing is lost silently: the log names it).
//
// Each key is used once (the caller puts the update number in it), so a late payload can never
// be mixed into a later round. The store keeps every round's payloads until the job ends.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "brigade/comm/store.h"

namespace brigade {

struct QuorumOptions {
  double quorum = 1.0;  // fraction of replicas whose payload must arrive, in (0, 1]
  std::chrono::milliseconds deadline{30000};  // the coordinator's wait per attempt, > 0
  int retries = 1;  // further deadlines the coordinator waits when short of the quorum, >= 0
};

// How many of `world` replicas a quorum fraction requires in every outer step: ceil(quorum *
// world), at least 1.
int quorum_required(double quorum, int world);

class QuorumExchange {
 public:
  // log receives one line per event (who was left out of which step, retries); may be empty.
  QuorumExchange(std::shared_ptr<Store> store, int world, int rank, QuorumOptions options,
                 std::function<void(const std::string&)> log);

  // Posts payload (bytes) under key and returns the members of this exchange, ascending;
  // gathered receives their payloads back to back in that order (grown as needed). `what`
  // names the step in log lines ("outer step at update 50"). Throws CommError when the quorum
  // is not reached (on every replica), when the store times out, or PayloadError when a
  // member's payload has the wrong size or the members list is malformed.
  std::vector<int> exchange(const std::string& key, const std::string& what, const uint8_t* payload,
                            int64_t bytes, std::vector<uint8_t>& gathered);

  // One line to the exchange's log (events of an outer step it decided, such as a member's
  // update left out of the mean).
  void note(const std::string& line) const {
    if (log_) log_(line);
  }

  int world() const { return world_; }
  int rank() const { return rank_; }
  int required() const { return required_; }

 private:
  std::vector<int> decide(const std::string& key, const std::string& what);

  std::shared_ptr<Store> store_;
  int world_, rank_;
  QuorumOptions options_;
  int required_;
  std::function<void(const std::string&)> log_;
};

// "0,1,3" <-> {0, 1, 3}. parse_members throws PayloadError unless the text lists distinct
// ascending ranks in [0, world), at least one.
std::string format_members(const std::vector<int>& members);
std::vector<int> parse_members(const std::string& text, int world);

}  // namespace brigade
