#pragma once
// The small GPT the layout tests cut into meshes (4 blocks of width 32, 4 heads, context 16, 4
// micro-batches of 2), at tp x pp (x ep, with 4 experts), built in memory: one definition for
// the tests of the hybrid layout, the job plan and the planner.
#include <cstdint>

#include "brigade/runtime/config.h"

namespace brigade::testing {

inline Config layout_gpt(int64_t tp, int64_t pp, int64_t ep = 1) {
  Config c;
  c.model.n_layer = 4;
  c.model.n_head = 4;
  c.model.d_model = 32;
  c.model.seq_len = 16;
  c.train.micro_batch = 2;
  c.train.grad_accum = 4;
  c.parallel.tp = tp;
  c.parallel.pp = pp;
  c.parallel.ep = ep;
  if (ep > 1) c.model.n_experts = 4;
  return c;
}

}  // namespace brigade::testing
