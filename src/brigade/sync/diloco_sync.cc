#include "brigade/sync/diloco_sync.h"

#include <cstring>
#include <string>

#include "brigade/base/check.h"
#include "brigade/sync/lowcomm/common.h"

namespace brigade {

DilocoSync::DilocoSync(const DilocoConfig& config, int64_t inner_steps, int fragments,
                       const ParamLayout& layout, const float* params)
    : inner_steps_(inner_steps), num_fragments_(fragments), num_params_(layout.total()) {
  BRIGADE_CHECK(inner_steps >= 1 && fragments >= 1 && fragments <= inner_steps)
      << "H " << inner_steps << " fragments " << fragments;
  for (int f = 0; f < fragments; ++f) {
    FlatRange r = fragments == 1 ? FlatRange{0, layout.total()}
                                 : fragment_range_aligned(layout, 0, layout.total(), fragments, f);
    outers_.push_back(std::make_unique<DilocoOuter>(config, params, r.begin, r.end));
  }
}

int DilocoSync::fragment_at(int64_t t) const {
  int f = streaming_fragment_at(t, inner_steps_, num_fragments_);
  return f >= 0 && outers_[f]->end() > outers_[f]->begin() ? f : -1;
}

void DilocoSync::step(float* params, float* grads, Optimizer* optimizer, float lr, int64_t t,
                      Communicator& comm) {
  optimizer->step(params, grads, 0, num_params_, lr, t);
  if (int f = fragment_at(t); f >= 0) outers_[f]->outer_step(params, comm);
}

Traffic DilocoSync::traffic(int64_t t, int world, int rank) const {
  int f = fragment_at(t);
  return f >= 0 ? outers_[f]->bytes_per_step(world, rank) : Traffic{};
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
    outers_[f]->outer_step(params, comm);
    moved = moved + outers_[f]->bytes_per_step(comm.size(), comm.rank());
  }
  return moved;
}

std::vector<StateView> DilocoSync::replicated_state() {
  std::vector<StateView> out;
  for (int f = 0; f < num_fragments_; ++f) {
    if (outers_[f]->end() == outers_[f]->begin()) continue;
    for (StateView v : outers_[f]->state_tensors()) {
      if (num_fragments_ > 1) v.name += ".f" + std::to_string(f);
      out.push_back(v);
    }
  }
  return out;
}

}  // namespace brigade
