#pragma once
// What a tensor-parallel model needs to know about its tp group: the communicator of the ranks
// that share each layer (the mesh's tp axis) and whether sequence parallelism is on. A default
// TpContext means no tensor parallelism: every helper in tp_comm.h is then a no-op.
#include "brigade/comm/communicator.h"

namespace brigade {

struct TpContext {
  Communicator* comm = nullptr;    // the tp group (not owned); null: tp = 1
  bool sequence_parallel = false;  // layernorm/residual regions on B*T/tp token rows

  int size() const { return comm ? comm->size() : 1; }
  int rank() const { return comm ? comm->rank() : 0; }
  bool active() const { return size() > 1; }
  bool sp() const { return active() && sequence_parallel; }
};

}  // namespace brigade
