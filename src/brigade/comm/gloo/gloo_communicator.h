#pragma once
// The Gloo backend: collectives over TCP between CPU processes (Debian libgloo-dev).
// Construct it through create_communicator() with backend "gloo".
//
// Rendezvous: every member publishes "<prefix>/proc/<rank>" = "<host>\n<pid>" in the store
// and waits (up to the timeout) until all members have, so a missing rank is reported by
// number; then Gloo's connectFullMesh exchanges TCP addresses through the same PrefixStore and
// opens one connection per pair of ranks. The TCP device binds CommOptions::hostname
// (127.0.0.1 by default, so nothing listens on external interfaces unless asked) or iface.
//
// Execution: collectives run on the communicator's worker thread in FIFO order (op_queue.h).
// send/recv are posted by the worker without waiting (Gloo's transport matches them by slot),
// and their Work::wait() waits for completion, so both sides of an exchange can be in flight.
#include <memory>
#include <string>

#include "brigade/comm/comm_factory.h"
#include "brigade/comm/communicator.h"
#include "brigade/comm/gloo/gloo_shared.h"
#include "brigade/comm/op_queue.h"
#include "brigade/comm/wire_traffic.h"

namespace brigade::detail {

class GlooCommunicator final : public Communicator {
 public:
  // Connects to the group; collective over its members. Throws ConfigError for invalid options
  // and CommError if the group does not assemble within options.timeout.
  explicit GlooCommunicator(const CommOptions& options);
  ~GlooCommunicator() override;

  int rank() const override { return shared_->rank; }
  int size() const override { return shared_->size; }
  const std::string& name() const override { return shared_->name; }
  const std::string& backend() const override { return backend_; }
  std::chrono::milliseconds timeout() const override { return shared_->timeout; }
  CommStats& stats() override { return shared_->stats; }

  std::unique_ptr<Work> all_reduce_async(float* data, int64_t n, ReduceOp op,
                                         WireDtype wire) override;
  std::unique_ptr<Work> reduce_scatter_async(const float* in, float* out, int64_t n_per_rank,
                                             ReduceOp op) override;
  std::unique_ptr<Work> all_gather_async(const float* in, float* out, int64_t n_per_rank) override;
  std::unique_ptr<Work> all_gather_v_async(const float* in, float* out,
                                           std::span<const int64_t> counts) override;
  std::unique_ptr<Work> all_gather_bytes_async(const uint8_t* in, uint8_t* out,
                                               int64_t bytes_per_rank) override;
  std::unique_ptr<Work> all_gather_bytes_v_async(const uint8_t* in, uint8_t* out,
                                                 std::span<const int64_t> counts) override;
  std::unique_ptr<Work> broadcast_async(float* data, int64_t n, int root) override;
  std::unique_ptr<Work> broadcast_bytes_async(void* data, int64_t bytes, int root) override;
  std::unique_ptr<Work> all_to_all_async(const float* in, float* out, int64_t n_per_rank) override;
  std::unique_ptr<Work> all_to_all_bytes_async(const uint8_t* in, uint8_t* out,
                                               int64_t bytes_per_rank) override;
  std::unique_ptr<Work> all_to_all_v_async(const float* in, std::span<const int64_t> send_counts,
                                           float* out,
                                           std::span<const int64_t> recv_counts) override;
  std::unique_ptr<Work> send_async(const void* data, int64_t bytes, int peer,
                                   uint32_t tag) override;
  std::unique_ptr<Work> recv_async(void* data, int64_t bytes, int peer, uint32_t tag) override;
  std::unique_ptr<Work> barrier_async() override;

 private:
  // Queues body on the worker; it runs after every earlier operation, records its traffic in
  // stats on success and turns a failure into a CommError that also breaks the communicator.
  std::unique_ptr<Work> enqueue(OpDesc op, std::function<Traffic()> body);
  std::unique_ptr<Work> p2p(bool is_send, void* data, int64_t bytes, int peer, uint32_t tag);
  std::vector<int64_t> checked_counts(std::span<const int64_t> counts, const char* what) const;

  std::string backend_ = "gloo";
  std::shared_ptr<GlooShared> shared_;
  OpQueue queue_;  // declared last: destroyed (drained and joined) first
};

}  // namespace brigade::detail
