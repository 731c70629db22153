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
// Memory budget. Forward holds at most two groups (the one computing and the one prefetched).
// Backward also holds the gradient of the group it is computing, so prefetching there as soon
// as the model hints would hold three groups' worth: that was ZeRO-3's peak. Instead, a
// prefetch starts only while
//   (elements gathered or in flight) + (elements of groups acquired in this backward whose
//   gradients are not yet final) + (the prefetched group)  <=  budget,
// budget = budget_groups x the largest group (default 2: what forward holds); a hint that does
// not fit waits, in order, until memory is given back: a release(), or a grads_final() report.
// Such a report also releases at once the non-owned parameters whose gradients are final: once
// every op reading a parameter has run its backward (which is what makes its gradient final),
// backward reads it no more, so a block's MLP weights go as soon as its MLP half is done and
// the next block is gathered while the attention half computes (what smaller groups would do,
// without changing the model's groups). The group then counts as partly present: acquiring it
// again before its release gathers it again. acquire() never waits for budget.
//
// All ranks must call acquire/prefetch/release/grads_final in the same order (the model's
// forward and backward do, since they run the same code); every decision above depends only on
// that sequence, never on timing, so the broadcasts are issued in the same order on every rank.
// They share the communicator's FIFO with the gradient reduce-scatters, in issue order.
#include <memory>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/model/model.h"
#include "brigade/parallel/zero_shard.h"

namespace brigade {

class ShardedParams : public ParamGatherer {
 public:
  // Installs itself as model's gatherer. model must list its param groups and have buffers
  // padded to shards.padded(). budget_groups (> 0, may be infinity: prefetch on every hint)
  // sets the budget above in units of the largest group.
  ShardedParams(Communicator& dp, Model& model, const ShardLayout& shards,
                double budget_groups = 2.0);
  ~ShardedParams() override;
  ShardedParams(const ShardedParams&) = delete;
  ShardedParams& operator=(const ShardedParams&) = delete;

  void prefetch(int group) override;
  void acquire(int group) override;
  void release(int group) override;

  // Call before every backward: gradients are produced from now until every element has been
  // reported final.
  void begin_backward();
  // Backward reported [offset, offset + count) final (Model's grad-ready hook): releases those
  // non-owned parameters of resident groups and starts waiting prefetches that now fit.
  void grads_final(int64_t offset, int64_t count);

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

  // Counting, for tests and benchmarks: the budget in elements, and the most elements ever held
  // by the rule above (gathered or in flight + gradients being produced) since construction.
  int64_t budget_elems() const { return budget_; }
  int64_t held_high_water() const { return high_water_; }
  // Prefetches started while a group was in use (so the gather overlaps compute), and gathers
  // that acquire() had to start itself.
  int64_t overlapped_prefetches() const { return overlapped_; }
  int64_t gathers_on_demand() const { return on_demand_; }

 private:
  // kPartial: resident except the parameters whose gradients were reported final.
  enum class State { kAbsent, kInFlight, kResident, kPartial };
  struct Group {
    FlatRange range;
    std::vector<int> owners;  // ranks whose shards overlap it, in rank order
    State state = State::kAbsent;
    std::vector<std::unique_ptr<Work>> work;
    int64_t held = 0;         // elements gathered or in flight (own piece included)
    int64_t final_elems = 0;  // elements reported final in this backward
    bool producing = false;   // acquired in this backward: its gradient is being produced
    bool pending = false;     // a prefetch hint waiting for budget
  };
  void launch(Group& g);
  void launch_prefetch(Group& g);
  void wait(Group& g);
  void release_unowned(FlatRange range);
  // Elements counted against the budget now.
  int64_t held_elems() const;
  bool fits(const Group& g) const;
  // Starts the waiting prefetches, oldest first, while they fit.
  void launch_pending();
  void end_backward();

  Communicator& dp_;
  Model& model_;
  ShardLayout shards_;
  FlatRange own_;
  std::vector<Group> groups_;
  std::vector<int> pending_;  // waiting prefetch hints, oldest first (capacity: every group)
  int64_t budget_ = 0;
  bool backward_ = false;
  int64_t reported_ = 0;  // elements reported final in this backward
  bool pinned_ = false;
  double waited_s_ = 0;
  int64_t high_water_ = 0, overlapped_ = 0, on_demand_ = 0;
};

}  // namespace brigade
