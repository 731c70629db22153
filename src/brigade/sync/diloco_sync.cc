#include "brigade/sync/diloco_sync.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "brigade/base/check.h"
#include "brigade/sync/lowcomm/common.h"

namespace brigade {

namespace {
// Test hook: BRIGADE_TEST_DILOCO_DELAY="rank:t:ms" makes that rank sleep ms milliseconds
// before posting its payload of the outer step after update t, as a stalled peer would.
void injected_delay(int rank, int64_t t) {
  const char* v = std::getenv("BRIGADE_TEST_DILOCO_DELAY");
  int r = -1;
  long long step = -1, ms = 0;
  if (!v || std::sscanf(v, "%d:%lld:%lld", &r, &step, &ms) != 3) return;
  if (r == rank && step == t && ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// The tensors of layout (a pipeline chunk's or a tp shard's, named as in whole) that lie in the
// whole model's flat range w, as a range of layout: they are contiguous there, since a chunk
// holds a run of the whole model's tensors in the same order.
FlatRange local_range(const ParamLayout& layout, const ParamLayout& whole, FlatRange w) {
  int64_t lo = layout.total(), hi = 0, held = 0;
  for (const ParamSpec& s : layout.specs()) {
    const ParamSpec* g = whole.find(s.name);
    BRIGADE_CHECK(g != nullptr) << s.name << " is not a tensor of the whole model";
    if (g->offset < w.begin || g->offset >= w.end) continue;
    lo = std::min(lo, s.offset);
    hi = std::max(hi, s.offset + s.numel);
    held += s.numel;
  }
  if (lo >= hi) return FlatRange{0, 0};
  BRIGADE_CHECK(held == hi - lo) << "the tensors of a fragment are not contiguous in the chunk";
  return FlatRange{lo, hi};
}
}  // namespace

DilocoSync::~DilocoSync() = default;

DilocoSync::DilocoSync(const DilocoConfig& config, int64_t inner_steps, int fragments,
                       const ParamLayout& layout, const float* params,
                       std::unique_ptr<QuorumExchange> quorum, const ParamLayout* whole)
    : inner_steps_(inner_steps),
      num_fragments_(fragments),
      num_params_(layout.total()),
      quorum_(std::move(quorum)) {
  BRIGADE_CHECK(inner_steps >= 1 && fragments >= 1 && fragments <= inner_steps)
      << "H " << inner_steps << " fragments " << fragments;
  for (int f = 0; f < fragments; ++f) {
    const ParamLayout& cut = whole ? *whole : layout;
    FlatRange r = fragments == 1 ? FlatRange{0, layout.total()}
                                 : fragment_range_aligned(cut, 0, cut.total(), fragments, f);
    if (whole && fragments > 1) r = local_range(layout, *whole, r);
    outers_.push_back(std::make_unique<DilocoOuter>(config, params, r.begin, r.end, &layout));
  }
}

int DilocoSync::fragment_at(int64_t t) const {
  int f = streaming_fragment_at(t, inner_steps_, num_fragments_);
  return f >= 0 && outers_[f]->end() > outers_[f]->begin() ? f : -1;
}

void DilocoSync::step(float* params, float* grads, Optimizer* optimizer, float lr, int64_t t,
                      Communicator& comm) {
  optimizer->step(params, grads, 0, num_params_, lr, t);
  if (int f = fragment_at(t); f >= 0) sync_fragment(f, params, t, false, comm);
}

void DilocoSync::sync_fragment(int f, float* params, int64_t t, bool final, Communicator& comm) {
  outers_[f]->set_update(t);
  if (!quorum_) {
    outers_[f]->outer_step(params, comm);
    return;
  }
  injected_delay(comm.rank(), t);
  const std::string key =
      "diloco/t" + std::to_string(t) + (final ? "e" : "") + "/f" + std::to_string(f);
  const std::string what = (final ? "final outer step after update " : "outer step after update ") +
                           std::to_string(t) +
                           (num_fragments_ > 1 ? " (fragment " + std::to_string(f) + ")" : "");
  outers_[f]->outer_step(params, *quorum_, key, what);
}

Traffic DilocoSync::fragment_traffic(int f, int world, int rank) const {
  return quorum_ ? outers_[f]->quorum_bytes_per_step(world)
                 : outers_[f]->bytes_per_step(world, rank);
}

Traffic DilocoSync::traffic(int64_t t, int world, int rank) const {
  int f = fragment_at(t);
  return f >= 0 ? fragment_traffic(f, world, rank) : Traffic{};
}

void DilocoSync::start(const float* params) {
  for (auto& outer : outers_) {
    float* global = outer->state_tensors()[0].data;
    std::memcpy(global, params + outer->begin(), sizeof(float) * (outer->end() - outer->begin()));
  }
}

Traffic DilocoSync::finish(float* params, int64_t t, Communicator& comm) {
  const int just_synced = t >= 1 ? fragment_at(t) : -1;
  Traffic moved;
  for (int f = 0; f < num_fragments_; ++f) {
    if (f == just_synced || outers_[f]->end() == outers_[f]->begin()) continue;
    sync_fragment(f, params, t, true, comm);
    moved = moved + fragment_traffic(f, comm.size(), comm.rank());
  }
  return moved;
}

std::vector<StateView> DilocoSync::replicated_state() {
  return fragment_state(false);
}

std::vector<StateView> DilocoSync::local_state() {
  return fragment_state(true);
}

std::vector<StateView> DilocoSync::fragment_state(bool local) {
  std::vector<StateView> out;
  for (int f = 0; f < num_fragments_; ++f) {
    if (outers_[f]->end() == outers_[f]->begin()) continue;
    for (StateView v : local ? outers_[f]->local_state_tensors() : outers_[f]->state_tensors()) {
      if (num_fragments_ > 1) v.name += ".f" + std::to_string(f);
      out.push_back(v);
    }
  }
  return out;
}

}  // namespace brigade
