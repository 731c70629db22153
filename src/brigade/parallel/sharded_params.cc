#include "brigade/parallel/sharded_params.h"

#include "brigade/base/check.h"
#include "brigade/monitor/timer.h"

namespace brigade {

ShardedParams::ShardedParams(Communicator& dp, Model& model, const ShardLayout& shards)
    : dp_(dp), model_(model), shards_(shards), own_(shards.owned(dp.rank())) {
  BRIGADE_CHECK(shards.world() == dp.size() && model.padded_size() == shards.padded())
      << "shards for " << shards.world() << " ranks over " << shards.padded()
      << " elements; group of " << dp.size() << ", model buffers " << model.padded_size();
  BRIGADE_CHECK(!model.param_groups().empty()) << "ZeRO-3 needs a model with param groups";
  for (const ParamGroup& pg : model.param_groups()) {
    Group g;
    g.range = {pg.begin, pg.end};
    g.owners = shards_.owners(g.range);
    g.work.reserve(g.owners.size());
    groups_.push_back(std::move(g));
  }
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

void ShardedParams::launch(Group& g) {
  for (int owner : g.owners) {
    const FlatRange piece = intersect(g.range, shards_.owned(owner));
    g.work.push_back(dp_.broadcast_async(model_.params() + piece.begin, piece.size(), owner));
  }
  g.state = State::kInFlight;
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
  if (g.state == State::kAbsent) launch(g);
}

void ShardedParams::acquire(int group) {
  Group& g = groups_.at(static_cast<size_t>(group));
  if (g.state == State::kAbsent) launch(g);
  if (g.state == State::kInFlight) wait(g);
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
}

void ShardedParams::release_all() {
  for (Group& g : groups_) {
    if (g.state == State::kInFlight) wait(g);
    g.state = State::kAbsent;
  }
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
  for (Group& g : groups_) g.state = State::kResident;
  pinned_ = true;
}

}  // namespace brigade
