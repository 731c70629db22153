#pragma once
// ZeRO-3 / FSDP parameter sharding: each rank keeps only its own shard of the parameters
// resident (parallel/zero_shard.h); the model's layer groups (Model::param_groups()) are
// gathered just before forward or backward reads them and released right after, with the next
// group prefetched while the current one computes.
//
// Gathering a group is an all-gather over the ranks whose shards it overlaps. Because shards are
// contiguous ranges of the flat space, a group is made of at most a few owners' pieces, each
// already lying in place in every rank's full-size buffer; so the all-gather is done as one
// in-place broadcast per owning rank (the owner's piece to everyone, with no staging copy). A
// rank receives exactly the group minus its own piece, as with a ring all-gather. Releasing a
// group returns the pages of its non-owned elements to the OS (madvise), so resident parameter
// memory is the own shard plus the groups in use and in flight. Pages shared by two groups are
// kept (and only ever overwritten by gathers of the right values).
//
// All ranks must call acquire/prefetch/release in the same order (the model's forward and
// backward do, since they run the same code); the broadcasts share the communicator's FIFO
// with the gradient reduce-scatters, in issue order.
#include <memory>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/model/model.h"
#include "brigade/parallel/zero_shard.h"

namespace brigade {

class ShardedParams : public ParamGatherer {
 public:
  // Installs itself as model's gatherer. model must list its param groups and have buffers
  // padded to shards.padded().
  ShardedParams(Communicator& dp, Model& model, const ShardLayout& shards);
  ~ShardedParams() override;
  ShardedParams(const ShardedParams&) = delete;
  ShardedParams& operator=(const ShardedParams&) = delete;

  void prefetch(int group) override;
  void acquire(int group) override;
  void release(int group) override;

  // Waits for every gather in flight, releases every non-owned parameter page and marks all
  // groups absent: call after the own shard changed (optimizer step, checkpoint load) and to
  // end gather_all().
  void release_all();

  // Collective: makes every parameter resident and keeps it so (release() does nothing) until
  // release_all(); for evaluation, where ranks run unequal numbers of forwards.
  void gather_all();

  // Seconds acquire() and release() spent waiting for gathers since the last call: the
  // parameter traffic that compute did not hide.
  double take_waited_seconds();

 private:
  enum class State { kAbsent, kInFlight, kResident };
  struct Group {
    FlatRange range;
    std::vector<int> owners;  // ranks whose shards overlap it, in rank order
    State state = State::kAbsent;
    std::vector<std::unique_ptr<Work>> work;
  };
  void launch(Group& g);
  void wait(Group& g);
  void release_unowned(FlatRange range);

  Communicator& dp_;
  Model& model_;
  ShardLayout shards_;
  FlatRange own_;
  std::vector<Group> groups_;
  bool pinned_ = false;
  double waited_s_ = 0;
};

}  // namespace brigade
