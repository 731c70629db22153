#pragma once
// One low-communication method as ReplicaSync (replica_sync.h) drives it: the exchange and
// update of one optimizer step, the bytes that exchange moves by formula, and the state a
// checkpoint must keep. Gradients reach step() local to this replica (no all-reduce ran), already
// clipped with the scale every replica agreed on.
//
// State comes in two kinds, because checkpoints are written by rank 0 alone:
//   replicated  the same bits on every replica (DiLoCo's theta_global, PowerSGD's Q): rank 0's
//               copy is saved and broadcast on resume;
//   local       differs between replicas (error-feedback residuals, DeMo's delta, DiLoCo's
//               local parameters and inner optimizer state): gathered to rank 0 per replica.
#include <cstdint>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/optim/optimizer.h"

namespace brigade {

class SyncMethod {
 public:
  virtual ~SyncMethod() = default;

  virtual const char* name() const = 0;
  // Whether step() updates through the run's optimizer (train.optimizer); DeMo does not.
  virtual bool uses_optimizer() const = 0;
  // Whether parameters (and the optimizer state) differ between replicas between syncs.
  virtual bool local_params() const { return false; }
  // Whether replicas step without waiting for each other between syncs (DiLoCo with a quorum):
  // then nothing, not even the per-step loss and gradient norm, is exchanged between syncs.
  virtual bool independent_steps() const { return false; }

  // Update number t (1-based count of applied updates): exchange with the other replicas over
  // comm and update params (flat, num_params values) from this replica's grads (which the
  // method may overwrite). optimizer is the run's optimizer over the whole flat range (null unless
  // uses_optimizer()).
  virtual void step(float* params, float* grads, Optimizer* optimizer, float lr, int64_t t,
                    Communicator& comm) = 0;
  // Bytes this rank sends and receives in step(t), by the method's formula.
  virtual Traffic traffic(int64_t t, int world, int rank) const = 0;

  // Fresh start: params hold the initial weights every replica shares.
  virtual void start(const float* /*params*/) {}
  // End of training after update t: bring replicas to one model if the method lets them drift
  // (collective). Returns the bytes it moved by formula.
  virtual Traffic finish(float* /*params*/, int64_t /*t*/, Communicator& /*comm*/) { return {}; }

  virtual std::vector<StateView> replicated_state() { return {}; }
  virtual std::vector<StateView> local_state() { return {}; }
};

}  // namespace brigade
