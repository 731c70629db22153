#include "brigade/parallel/sharded_params.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "brigade/base/check.h"
#include "brigade/monitor/timer.h"

namespace brigade {

ShardedParams::ShardedParams(Communicator& dp, Model& model, const ShardLayout& shards,
                             double budget_groups)
    : dp_(dp), model_(model), shards_(shards), own_(shards.owned(dp.rank())) {
  BRIGADE_CHECK(shards.world() == dp.size() && model.padded_size() == shards.padded())
      << "shards for " << shards.world() << " ranks over " << shards.padded()
      << " elements; group of " << dp.size() << ", model buffers " << model.padded_size();
  BRIGADE_CHECK(!model.param_groups().empty()) << "ZeRO-3 needs a model with param groups";
  BRIGADE_CHECK(budget_groups > 0) << "budget_groups " << budget_groups;
  int64_t largest = 0;
  for (const ParamGroup& pg : model.param_groups()) {
    Group g;
    g.range = {pg.begin, pg.end};
    g.owners = shards_.owners(g.range);
    g.work.reserve(g.owners.size());
    largest = std::max(largest, g.range.size());
    groups_.push_back(std::move(g));
  }
  const double budget = budget_groups * static_cast<double>(largest);
  budget_ = std::isinf(budget) || budget >= 0x1p62 ? std::numeric_limits<int64_t>::max()
                                                   : static_cast<int64_t>(budget);
  pending_.reserve(groups_.size());  // the hooks never allocate
  model_.set_param_gatherer(this);
}

ShardedParams::~ShardedParams() {
  model_.set_param_gatherer(nullptr);
  for (Group& g : groups_) {
    for (auto& w : g.work) {
      try {
        w->wait();  // a broadcast in flight writes into the model's buffer
      } catch (const std::exception&) {
        // The communicator is broken; the caller's path reports it.
      }
    }
  }
}

int64_t ShardedParams::held_elems() const {
  int64_t n = 0;
  for (const Group& g : groups_) {
    n += g.held;
    if (g.producing) n += g.range.size() - g.final_elems;
  }
  return n;
}

bool ShardedParams::fits(const Group& g) const {
  if (budget_ == std::numeric_limits<int64_t>::max()) return true;
  return held_elems() + (g.range.size() - g.held) <= budget_;
}

void ShardedParams::launch(Group& g) {
  // A partly present group is gathered whole again (its released pages read as zero); acquire
  // does that while the caller waits, so nothing reads the pages being written.
  for (int owner : g.owners) {
    const FlatRange piece = intersect(g.range, shards_.owned(owner));
    g.work.push_back(dp_.broadcast_async(model_.params() + piece.begin, piece.size(), owner));
  }
  g.state = State::kInFlight;
  g.held = g.range.size();
  high_water_ = std::max(high_water_, held_elems());
}

void ShardedParams::launch_prefetch(Group& g) {
  launch(g);
  // Resident (or partly) means acquired and not released: a group computing meanwhile.
  for (const Group& other : groups_) {
    if (other.state == State::kResident || other.state == State::kPartial) {
      ++overlapped_;
      break;
    }
  }
}

void ShardedParams::wait(Group& g) {
  Stopwatch watch;
  for (auto& w : g.work) w->wait();
  waited_s_ += watch.seconds();
  g.work.clear();
  g.state = State::kResident;
}

void ShardedParams::prefetch(int group) {
  Group& g = groups_.at(static_cast<size_t>(group));
  // A partly present group is in use: gathering it in the background would write into pages
  // the model is reading. Its next acquire gathers it again.
  if (g.pending || g.state != State::kAbsent) return;
  if (pending_.empty() && fits(g)) {
    launch_prefetch(g);
  } else {
    g.pending = true;  // after the hints before it, in order, once it fits
    pending_.push_back(group);
  }
}

void ShardedParams::acquire(int group) {
  Group& g = groups_.at(static_cast<size_t>(group));
  if (g.pending) {
    g.pending = false;
    pending_.erase(std::find(pending_.begin(), pending_.end(), group));
  }
  if (g.state == State::kAbsent || g.state == State::kPartial) {
    launch(g);
    ++on_demand_;
  }
  if (g.state == State::kInFlight) wait(g);
  if (backward_ && !g.producing) {
    g.producing = true;
    high_water_ = std::max(high_water_, held_elems());
  }
}

void ShardedParams::release_unowned(FlatRange range) {
  FlatBuffer& params = model_.param_buffer();
  const FlatRange before = intersect(range, {0, own_.begin});
  const FlatRange after = intersect(range, {own_.end, shards_.padded()});
  if (!before.empty()) params.release(before.begin, before.end);
  if (!after.empty()) params.release(after.begin, after.end);
}

void ShardedParams::release(int group) {
  if (pinned_) return;
  Group& g = groups_.at(static_cast<size_t>(group));
  if (g.state == State::kAbsent) return;
  if (g.state == State::kInFlight) wait(g);  // never drop pages a broadcast is writing
  release_unowned(g.range);
  g.state = State::kAbsent;
  g.held = 0;
  launch_pending();
}

void ShardedParams::begin_backward() {
  for (Group& g : groups_) {
    g.final_elems = 0;
    g.producing = false;
  }
  reported_ = 0;
  backward_ = true;
}

void ShardedParams::end_backward() {
  for (Group& g : groups_) g.producing = false;
  backward_ = false;
}

void ShardedParams::grads_final(int64_t offset, int64_t count) {
  if (!backward_) return;
  for (Group& g : groups_) {
    const FlatRange done = intersect(g.range, {offset, offset + count});
    if (done.empty()) continue;
    g.final_elems += done.size();
    // Pages a broadcast is writing are left alone; a pinned (evaluation) gather stays whole.
    if (pinned_ || (g.state != State::kResident && g.state != State::kPartial)) continue;
    release_unowned(done);
    g.held -= done.size();
    g.state = State::kPartial;
  }
  reported_ += count;
  if (reported_ >= shards_.total()) end_backward();  // every gradient is final
  launch_pending();
}

void ShardedParams::launch_pending() {
  size_t started = 0;
  while (started < pending_.size()) {
    Group& g = groups_[static_cast<size_t>(pending_[started])];
    if (!fits(g)) break;
    g.pending = false;
    launch_prefetch(g);
    ++started;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(started));
}

void ShardedParams::release_all() {
  for (Group& g : groups_) {
    if (g.state == State::kInFlight) wait(g);
    g.state = State::kAbsent;
    g.held = 0;
    g.pending = false;
  }
  pending_.clear();
  end_backward();
  release_unowned({0, shards_.padded()});
  pinned_ = false;
}

double ShardedParams::take_waited_seconds() {
  const double s = waited_s_;
  waited_s_ = 0;
  return s;
}

void ShardedParams::gather_all() {
  release_all();  // same state on every rank before the collective sequence below
  for (int r = 0; r < dp_.size(); ++r) {
    const FlatRange piece = shards_.owned(r);
    if (!piece.empty()) dp_.broadcast(model_.params() + piece.begin, piece.size(), r);
  }
  for (Group& g : groups_) {
    g.state = State::kResident;
    g.held = g.range.size();
  }
  pinned_ = true;
}

}  // namespace brigade
