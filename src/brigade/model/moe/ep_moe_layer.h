#pragma once
// Expert parallelism: a MoE MLP (model/moe/moe_layer.h) whose experts are spread over an ep
// group of k ranks, rank p holding experts [p E/k, (p+1) E/k). Every rank routes its own tokens;
// the kept assignments travel to the ranks that own their experts and the expert outputs come
// back, both with all_to_all_v. "ep is carved out of dp": the ranks of one ep group train on
// different tokens, and the group as a whole equals one process routing the concatenation of
// its ranks' tokens (same routing, same drops, same outputs, same loss).
//
// Forward, per layer call (k = ep size, T = 1 + E*K + E):
//   1. route the local tokens (MoeRouter);
//   2. all_gather a table of T floats per rank: [N_r, assignments per (expert, slot), sum of
//      each expert's probability]. Counts first: from it every rank knows the group's token
//      count (hence the capacity), the priority position of each of its assignments (so it
//      drops the overflow itself, before sending), how many rows it will receive from each
//      peer, and the group-wide f_e and P_e of the load-balancing loss;
//   3. dispatch: all_to_all_v of the kept token rows (C floats each), already grouped by owner;
//   4. the owner regroups the rows by local expert, runs the expert MLPs, regroups back;
//   5. combine: the reverse all_to_all_v returns the expert outputs, weighted by the gates at
//      the source rank.
// Backward mirrors it: gate-weighted output gradients travel to the owners (all_to_all_v), the
// experts accumulate their weight gradients and return input gradients (all_to_all_v back).
// Bytes sent by rank r per forward + backward: all_gather (k-1) * 4T, plus
// 2 * 4C * (rows r sends to other ranks + rows other ranks send to r).
//
// Gradients: expert gradients on their owner already sum the contributions of every token of
// the group; router gradients are this rank's tokens' share. Under data parallelism with dp x ep
// replicas, average the router (and every non-expert) gradient over all dp x ep ranks and the
// expert gradients over the dp axis only, dividing by dp * ep (docs/parallelism.md).
#include <cstdint>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/model/moe/expert_mlp.h"
#include "brigade/model/moe/moe_capacity.h"
#include "brigade/model/moe/moe_config.h"
#include "brigade/model/moe/moe_dispatch.h"
#include "brigade/model/moe/moe_mlp.h"
#include "brigade/model/moe/moe_params.h"
#include "brigade/model/moe/moe_router.h"

namespace brigade {

// Throws ConfigError unless model.n_experts is divisible by parallel.ep (naming both factors).
void validate_expert_parallel(const MoeConfig& config, int ep_size);

class EpMoeLayer : public MoeMlp {
 public:
  // ep is this layer's ep group (it must outlive the layer); params holds the router and this
  // rank's experts [rank E/k, (rank+1) E/k) (add_moe_params). max_tokens must be the same on
  // every rank of the group: receive buffers are sized for the whole group from it.
  // expert_grad_scale multiplies the experts' weight gradients (not the input gradients they
  // return): pass 1 / ep when every gradient is afterwards AVERAGED over its replicas, since an
  // expert has none along ep yet its gradient already sums the loss of every rank of the group.
  EpMoeLayer(const MoeConfig& config, const MoeParams& params, Communicator& ep, int64_t max_tokens,
             float expert_grad_scale = 1.0f);

  // Collective over the ep group. x, out are (N,C) for this rank's N <= max_tokens tokens (N may
  // differ between ranks, and be 0). Returns aux_loss_coef * aux of the group's union (the same
  // on every rank); stats() describe the group's union.
  float forward(float* out, const float* x, int64_t N, const float* params) override;

  // Collective. Backward of the last forward (same x): dout (N,C) = d loss / d out, loss_grad =
  // d loss / d (returned term) seen from this rank. Accumulates dx, the router gradient of this
  // rank's tokens and the full gradients of this rank's experts. When every rank's loss includes
  // the term and gradients are then AVERAGED over the ep ranks, pass loss_scale * ep: each rank
  // holds only its own tokens' share of d aux / d router.
  void backward(float* dx, const float* dout, const float* x, float loss_grad, const float* params,
                float* grads) override;

  const MoeStats& stats() const override { return stats_; }
  int64_t local_dropped() const { return dispatch_.dropped(); }  // of this rank's assignments
  const MoeRouter& router() const { return router_; }
  const MoeDispatch& dispatch() const { return dispatch_; }
  int64_t local_experts() const { return e_local_; }

 private:
  void read_tables();   // validates the gathered tables (they came over the wire)
  void plan_receive();  // starts_, recv_rows_, recv_counts_, expert_row_begin_
  void to_expert_major(float* dst, const float* src) const;  // source-major -> expert-major
  void to_source_major(float* dst, const float* src) const;  // and back

  MoeConfig config_;
  MoeParams params_;
  Communicator& ep_;
  int k_, rank_;
  int64_t e_local_, max_tokens_, max_recv_rows_;
  float expert_grad_scale_;
  MoeRouter router_;
  MoeDispatch dispatch_;
  ExpertMlps experts_;
  MoeStats stats_;
  int64_t n_total_ = 0, capacity_ = -1;

  std::vector<float> table_, tables_;    // (T), (k,T)
  std::vector<int64_t> all_counts_;      // (k,E,K)
  std::vector<int64_t> total_counts_;    // (E,K)
  std::vector<double> total_prob_sums_;  // (E)
  std::vector<double> load_fraction_;    // (E)
  std::vector<int64_t> starts_;          // (k,E,K): priority start of each rank's assignments
  std::vector<int64_t> recv_rows_;       // (k,E_local): rows from rank q for local expert j
  std::vector<int64_t> send_counts_, recv_counts_;  // (k) floats
  std::vector<int64_t> expert_row_begin_;           // (E_local+1)
  std::vector<float> dgate_;                        // (max_tokens,K)
  // Source side (this rank's kept assignments, expert-major = owner-major): token rows out,
  // expert outputs back; reused for the output gradients and input gradients in backward.
  std::vector<float> send_, y_rows_;
  // Owner side (rows received for local experts): as received (source-major), regrouped by
  // expert, expert outputs, regrouped back.
  std::vector<float> recv_, expert_in_, expert_out_, ret_;
};

}  // namespace brigade
