#pragma once
// DiLoCo's outer step (Douillard et al. 2023; OpenDiLoCo; INTELLECT-1), over one flat range.
//
// M replicas start an outer round from the same theta_global and each takes H inner steps of
// its own optimizer. Then, over the range:
//   Delta_i = theta_global - theta_local_i            (pseudo-gradient)
//   Delta   = mean_i Delta_i                          (all_reduce avg, or int8 payloads)
//   v = mu v + Delta;  theta_global -= lr (Delta + mu v)     (outer Nesterov SGD)
//   theta_local = theta_global                        (inner optimizer state is kept)
// With nesterov = false the update is heavy-ball: theta_global -= lr v.
//
// Wire: kF32 all-reduces 4n bytes (Gloo ring: 2 (W-1)/W * 4n per rank). kInt8 quantizes
// Delta_i (int8_quant.h), all_gathers the W payloads of Int8Codec::size_bytes() each
// ((W - 1) * size_bytes() per rank each way) and every replica dequantizes and averages them in
// rank order, so all replicas hold bitwise-identical theta_global.
// kDctTopk compresses the pseudo-gradient the way DeMo compresses its residual (dct_topk.h),
// with error feedback per replica (beta = residual_decay, 1 unless set; SparseLoCo, Sarfi et
// al. 2025, decays it):
//   e_i = beta e_i + Delta_i;  payload_i = top-k DCT coefficients of e_i;  e_i -= decode(payload_i)
//   Delta = (1/W) sum_i decode(payload_i)               (all_gather, decoded in rank order)
// so nothing a replica drifted is lost, only delayed; e_i is local state
// ("diloco.residual"). Bytes: (W - 1) * DctTopkCodec::size_bytes() each way per rank.
// kSign sends Delta_i through the error-fed 1-bit all-reduce (sign_allreduce.h): signs and a
// scale per block, error feedback at every replica and at every shard's owner; about
// 2 (W - 1) / W * n / 8 bytes each way, 32x less than kF32. Its two residuals are local state.
// kPowerSgd compresses the mean pseudo-gradient to rank r per matrix (powersgd.h), with error
// feedback per replica: P and Q are all-reduced, so the low-rank basis is chosen from the
// replicas' mean, not from each replica's own drift. Collectives only (no quorum exchange).
//
// Streaming DiLoCo syncs P fragments of the model on staggered schedules: fragment_range()
// says which contiguous range fragment f covers, streaming_fragment_at() which fragment syncs
// after an inner step; one DilocoOuter per fragment does the rest.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brigade/base/flat_range.h"
#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/optim/optimizer.h"
#include "brigade/optim/robust_aggregate.h"
#include "brigade/sync/lowcomm/dct_topk.h"
#include "brigade/sync/lowcomm/int8_quant.h"
#include "brigade/sync/lowcomm/powersgd.h"
#include "brigade/sync/lowcomm/quorum_exchange.h"
#include "brigade/sync/lowcomm/sign_allreduce.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

enum class OuterWire { kF32, kInt8, kDctTopk, kSign, kPowerSgd };

struct DilocoConfig {
  float outer_lr = 0.7f;  // > 0
  float momentum = 0.9f;  // mu, in [0, 1)
  bool nesterov = true;   // Nesterov (DiLoCo) or heavy-ball outer momentum
  OuterWire wire = OuterWire::kF32;
  int64_t int8_chunk = int64_t{1} << 18;  // values per int8 chunk (one 1 KiB table each), >= 1
  // kDctTopk: coefficients per chunk, chunk edge, value format; chunk_scales is implied for
  // 1bit (a pseudo-gradient needs magnitudes, unlike DeMo's sign update).
  DctTopkConfig dct = {};
  // kDctTopk: e_i = residual_decay * e_i + Delta_i (SparseLoCo's decayed error feedback, which
  // stands in for outer momentum; 1 = classic error feedback). In (0, 1].
  float residual_decay = 1.0f;
  int64_t sign_block = 256;      // kSign: values per scale, >= 8
  PowerSgdConfig powersgd = {};  // kPowerSgd: rank, seed, wire of P and Q
  // Quorum steps only: how the members' pseudo-gradients are combined (optim/robust_aggregate.h;
  // "mean" is DiLoCo's average) and the L2 bound each is scaled down to first (0: none). A
  // member whose decoded pseudo-gradient is not finite is always left out, by every replica.
  RobustRule outer_rule = {};
  double outer_norm_bound = 0;
  // Throws ConfigError naming the key ("diloco.outer_lr"), the value and what is allowed.
  void validate() const;
};

class DilocoOuter {
 public:
  // Outer state for [begin, end): theta_global = params[begin, end) (params indexed by flat
  // offset), v = 0, residual 0. kDctTopk needs the layout ([begin, end) whole tensors of it).
  DilocoOuter(const DilocoConfig& config, const float* params, int64_t begin, int64_t end,
              const ParamLayout* layout = nullptr);
  ~DilocoOuter();

  // Collective over comm. params[begin, end) holds theta_local on entry and the new
  // theta_global on return. Throws PayloadError / CommError on a bad payload or failed
  // collective; the state is unchanged then, except kDctTopk's residual, which already holds
  // this Delta (the run stops on such an error).
  void outer_step(float* params, Communicator& comm);
  // kPowerSgd keys the redraw of dead Q columns by the update number of the outer step.
  void set_update(int64_t t) {
    if (powersgd_) powersgd_->set_steps(t);
  }
  // The same step with the payloads exchanged through the store (quorum_exchange.h): the mean
  // is over the members only, which it returns. Every replica, member or not, ends with the
  // same theta_global. key must be unique per outer step of this range.
  std::vector<int> outer_step(float* params, QuorumExchange& exchange, const std::string& key,
                              const std::string& what);

  // The local halves, for tests: pseudo_gradient() writes Delta_i = theta_global - params into
  // delta (end - begin values); apply_mean() takes the replicas' mean Delta and does the
  // Nesterov update and the copy back into params.
  void pseudo_gradient(const float* params, float* delta) const;
  void apply_mean(const float* mean_delta, float* params);

  // This rank's message: 4n bytes (kF32), the int8 or the dct top-k payload size.
  int64_t payload_bytes() const;
  // Bytes this rank sends and receives in one outer_step().
  Traffic bytes_per_step(int world, int rank) const;
  // Bytes of the store exchange when every replica reports: payload_bytes() sent, (world - 1)
  // payloads received; rounds: one set, one get of the members, world - 1 payload gets.
  Traffic quorum_bytes_per_step(int world) const;

  // "diloco.global" and (if momentum > 0) "diloco.momentum" over [begin, end); kPowerSgd adds
  // its warm-start Q's, "diloco.powersgd_q" over [0, q floats).
  std::vector<StateView> state_tensors();
  // kDctTopk and kPowerSgd: "diloco.residual" over [begin, end), this replica's error
  // feedback; kSign: that and "diloco.owner_residual" (the owner stage's); else none.
  std::vector<StateView> local_state_tensors();
  const float* residual() const { return residual_.data(); }
  const float* global() const { return global_.data(); }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }

 private:
  // delta_ (Delta_i) -> the bytes this replica sends (for kF32 delta_ itself).
  const uint8_t* encode_delta();
  void validate_payload(const uint8_t* p, int64_t bytes, int from);
  void decode_add(const uint8_t* p, float* sum);

  DilocoConfig config_;
  int64_t begin_, end_;
  std::vector<float> global_, momentum_, delta_;
  Int8Codec codec_;
  std::unique_ptr<DctTopkCodec> dct_;    // kDctTopk only
  std::unique_ptr<SignAllReduce> sign_;  // kSign only
  std::unique_ptr<PowerSgd> powersgd_;   // kPowerSgd only
  std::vector<float> flat_;              // kPowerSgd: Delta at flat offsets [begin, end)
  std::vector<float> residual_;          // kDctTopk only: e_i
  std::vector<uint8_t> payload_, gathered_;
  std::vector<std::vector<float>> member_deltas_;  // quorum steps: each member's decoded Delta

  // The quorum step's combination of the members' payloads into delta_; returns the members
  // whose pseudo-gradients it used.
  std::vector<int> combine_members(const std::vector<int>& members, int64_t bytes,
                                   QuorumExchange& exchange, const std::string& what);
};

// Fragment f of num_fragments (P) over [begin, end): P contiguous pieces that tile the range in
// order, sizes differing by at most one (the first (end - begin) % P are one longer).
FlatRange fragment_range(int64_t begin, int64_t end, int num_fragments, int fragment);

// The same cut moved to tensor boundaries of layout: cut f (1..P-1) is the tensor boundary in
// [begin, end] nearest to the even cut (ties to the lower one), never before cut f - 1. A
// fragment is empty when one tensor spans several even cuts.
FlatRange fragment_range_aligned(const ParamLayout& layout, int64_t begin, int64_t end,
                                 int num_fragments, int fragment);

// Which fragment syncs after inner step `step` (1-based count of finished inner steps) when
// every fragment syncs once per `period` (H) steps, staggered: fragment f syncs at steps
// (f + 1) * H / P + m * H, m >= 0 (integer division). With P = 1 this is plain DiLoCo (every H
// steps). Returns -1 when none does. Requires 1 <= P <= H.
int streaming_fragment_at(int64_t step, int64_t period, int num_fragments);

}  // namespace brigade
