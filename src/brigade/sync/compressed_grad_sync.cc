#include "brigade/sync/compressed_grad_sync.h"

namespace brigade {

void PowerSgdSync::step(float* params, float* grads, Optimizer* optimizer, float lr, int64_t t,
                        Communicator& comm) {
  // PowerSGD keys the redraw of dead Q columns by its step count; it runs once per applied
  // update, so the count is t - 1 here, also right after a resume.
  psgd_.set_steps(t - 1);
  psgd_.reduce(grads, comm);
  optimizer->step(params, grads, 0, num_params_, lr, t);
}

std::vector<StateView> PowerSgdSync::replicated_state() {
  if (psgd_.q_floats() == 0) return {};
  return {{"powersgd.q", psgd_.q_state().data(), 0, psgd_.q_floats(), false}};
}

void SignEfSync::step(float* params, float* grads, Optimizer* optimizer, float lr, int64_t t,
                      Communicator& comm) {
  signef_.step(grads, 1.0f, update_.data(), comm);
  optimizer->step(params, update_.data(), 0, static_cast<int64_t>(update_.size()), lr, t);
}

void TopkEfSync::step(float* params, float* grads, Optimizer* optimizer, float lr, int64_t t,
                      Communicator& comm) {
  topk_.step(grads, 1.0f, update_.data(), comm);
  optimizer->step(params, update_.data(), 0, static_cast<int64_t>(update_.size()), lr, t);
}

}  // namespace brigade
