#include "brigade/comm/gloo/gloo_communicator.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <atomic>

#include "brigade/base/check.h"
#include "brigade/base/trace.h"
#include "brigade/comm/gloo/gloo_collectives.h"

namespace brigade::detail {

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

// Point-to-point messages use their own slot range, far above the slots Gloo's collectives
// derive from their prefixes (< 2^60), so a send/recv never matches a collective's message.
constexpr uint64_t kP2PSlotBase = uint64_t{1} << 62;

// The ring neighbours of `rank`, for error messages.
std::vector<int> ring_peers(int rank, int size) {
  if (size == 1) return {};
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  if (next == prev) return {next};
  return {prev, next};
}

// A send or recv in flight: posted by the worker thread, completed by whoever waits.
struct P2PState {
  std::shared_ptr<GlooShared> shared;
  OpDesc op;
  bool is_send = false;
  std::shared_ptr<WorkState> posted;
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer;  // set by the worker when posted
  std::mutex mu;                                           // serializes waiters
  bool finished = false;
  std::atomic<bool> completed{false};  // finished, readable without the mutex
  std::optional<OpError> error;
};

class P2PWork final : public Work {
 public:
  explicit P2PWork(std::shared_ptr<P2PState> st) : st_(std::move(st)) {}
  ~P2PWork() override { finish(); }

  void wait() override {
    std::optional<OpError> error = finish();
    if (error) throw CommError(error->kind, error->message);
  }
  // Gloo offers no non-blocking completion test for a transfer, so a send/recv reports
  // completion only once wait() has returned (or its posting failed).
  bool is_completed() const override {
    // The buffer is written before `posted` finishes, so it may be read once posted is done.
    return st_->completed || (st_->posted->done() && st_->buffer == nullptr);
  }

 private:
  std::optional<OpError> finish() {
    std::lock_guard<std::mutex> lock(st_->mu);
    if (st_->finished) return st_->error;
    st_->finished = true;
    st_->error = st_->posted->wait_for_result();
    if (st_->error) {
      st_->completed = true;
      return st_->error;
    }
    GlooShared& s = *st_->shared;
    const auto start = Clock::now();
    // The wait for the transfer, on the thread that waits (the pipeline's, inside its action).
    TraceSpan span("comm", st_->is_send ? "send" : "recv");
    span.set("group", s.name);
    span.set("bytes", st_->op.bytes);
    try {
      bool ok = st_->is_send ? st_->buffer->waitSend(s.timeout) : st_->buffer->waitRecv(s.timeout);
      if (!ok) throw CommError(CommError::Kind::kOther, "transfer aborted");
      if (st_->is_send) {
        s.stats.record(OpKind::kSend, st_->op.bytes, 0, 1);
      } else {
        s.stats.record(OpKind::kRecv, 0, st_->op.bytes, 1);
      }
    } catch (...) {
      CommError e = make_comm_error(std::current_exception(), s, st_->op, since(start));
      s.mark_broken(e);
      st_->error = OpError{e.kind(), e.what()};
    }
    st_->completed = true;
    return st_->error;
  }

  std::shared_ptr<P2PState> st_;
};

}  // namespace

GlooCommunicator::GlooCommunicator(const CommOptions& options)
    : shared_(std::make_shared<GlooShared>()) {
  options.validate();
  shared_->rank = options.rank;
  shared_->size = options.size;
  shared_->name = options.group_name;
  shared_->timeout = options.timeout;
  gloo_connect(*shared_, options);
}

GlooCommunicator::~GlooCommunicator() = default;

std::unique_ptr<Work> GlooCommunicator::enqueue(OpDesc op, std::function<Traffic()> body) {
  std::shared_ptr<GlooShared> s = shared_;
  auto state = queue_.submit([s, op = std::move(op), body = std::move(body)] {
    s->throw_if_broken(op);
    TraceSpan span("comm", op_kind_name(op.kind));
    const auto start = Clock::now();
    Traffic t;
    try {
      t = body();
    } catch (...) {
      CommError e = make_comm_error(std::current_exception(), *s, op, since(start));
      s->mark_broken(e);
      throw e;
    }
    s->stats.record(op.kind, t.sent, t.received, t.rounds);
    span.set("group", s->name);
    span.set("bytes_sent", t.sent);
    span.set("bytes_received", t.received);
  });
  return std::make_unique<QueuedWork>(std::move(state));
}

std::vector<int64_t> GlooCommunicator::checked_counts(std::span<const int64_t> counts,
                                                      const char* what) const {
  BRIGADE_CHECK(static_cast<int>(counts.size()) == size())
      << what << ": " << counts.size() << " counts for a group of size " << size();
  for (int64_t c : counts) BRIGADE_CHECK(c >= 0) << what << ": negative count " << c;
  return std::vector<int64_t>(counts.begin(), counts.end());
}

std::unique_ptr<Work> GlooCommunicator::all_reduce_async(float* data, int64_t n, ReduceOp op,
                                                         WireDtype wire) {
  BRIGADE_CHECK(n >= 0 && (data != nullptr || n == 0)) << "all_reduce: n " << n;
  GlooShared* s = shared_.get();
  const bool bf16 = wire == WireDtype::kBF16;
  OpDesc desc{OpKind::kAllReduce, n * (bf16 ? 2 : 4),
              bf16 ? std::vector<int>{} : ring_peers(rank(), size())};
  return enqueue(std::move(desc), [s, data, n, op, bf16] {
    return bf16 ? gloo_all_reduce_bf16(*s, data, n, op) : gloo_all_reduce_f32(*s, data, n, op);
  });
}

std::unique_ptr<Work> GlooCommunicator::reduce_scatter_async(const float* in, float* out,
                                                             int64_t n_per_rank, ReduceOp op) {
  BRIGADE_CHECK(n_per_rank >= 0) << "reduce_scatter: n_per_rank " << n_per_rank;
  GlooShared* s = shared_.get();
  return enqueue(
      OpDesc{OpKind::kReduceScatter, n_per_rank * size() * 4, {}},
      [s, in, out, n_per_rank, op] { return gloo_reduce_scatter(*s, in, out, n_per_rank, op); });
}

std::unique_ptr<Work> GlooCommunicator::all_gather_async(const float* in, float* out,
                                                         int64_t n_per_rank) {
  BRIGADE_CHECK(n_per_rank >= 0) << "all_gather: n_per_rank " << n_per_rank;
  GlooShared* s = shared_.get();
  std::vector<int64_t> counts(size(), n_per_rank);
  return enqueue(OpDesc{OpKind::kAllGather, n_per_rank * 4, ring_peers(rank(), size())},
                 [s, in, out, counts] { return gloo_all_gather_v(*s, in, out, counts, 4); });
}

std::unique_ptr<Work> GlooCommunicator::all_gather_v_async(const float* in, float* out,
                                                           std::span<const int64_t> counts) {
  GlooShared* s = shared_.get();
  std::vector<int64_t> c = checked_counts(counts, "all_gather_v");
  return enqueue(OpDesc{OpKind::kAllGatherV, c[rank()] * 4, ring_peers(rank(), size())},
                 [s, in, out, c] { return gloo_all_gather_v(*s, in, out, c, 4); });
}

std::unique_ptr<Work> GlooCommunicator::all_gather_bytes_async(const uint8_t* in, uint8_t* out,
                                                               int64_t bytes_per_rank) {
  BRIGADE_CHECK(bytes_per_rank >= 0) << "all_gather_bytes: " << bytes_per_rank;
  GlooShared* s = shared_.get();
  std::vector<int64_t> counts(size(), bytes_per_rank);
  return enqueue(OpDesc{OpKind::kAllGatherBytes, bytes_per_rank, ring_peers(rank(), size())},
                 [s, in, out, counts] { return gloo_all_gather_v(*s, in, out, counts, 1); });
}

std::unique_ptr<Work> GlooCommunicator::all_gather_bytes_v_async(const uint8_t* in, uint8_t* out,
                                                                 std::span<const int64_t> counts) {
  GlooShared* s = shared_.get();
  std::vector<int64_t> c = checked_counts(counts, "all_gather_bytes_v");
  return enqueue(OpDesc{OpKind::kAllGatherBytes, c[rank()], ring_peers(rank(), size())},
                 [s, in, out, c] { return gloo_all_gather_v(*s, in, out, c, 1); });
}

std::unique_ptr<Work> GlooCommunicator::broadcast_async(float* data, int64_t n, int root) {
  return broadcast_bytes_async(data, n * 4, root);
}

std::unique_ptr<Work> GlooCommunicator::broadcast_bytes_async(void* data, int64_t bytes, int root) {
  BRIGADE_CHECK(bytes >= 0 && root >= 0 && root < size())
      << "broadcast: bytes " << bytes << " root " << root << " size " << size();
  GlooShared* s = shared_.get();
  std::vector<int> peers = rank() == root ? std::vector<int>{} : std::vector<int>{root};
  return enqueue(OpDesc{OpKind::kBroadcast, bytes, std::move(peers)},
                 [s, data, bytes, root] { return gloo_broadcast(*s, data, bytes, root); });
}

std::unique_ptr<Work> GlooCommunicator::all_to_all_async(const float* in, float* out,
                                                         int64_t n_per_rank) {
  BRIGADE_CHECK(n_per_rank >= 0) << "all_to_all: n_per_rank " << n_per_rank;
  GlooShared* s = shared_.get();
  return enqueue(OpDesc{OpKind::kAllToAll, n_per_rank * size() * 4, {}},
                 [s, in, out, n_per_rank] { return gloo_all_to_all(*s, in, out, n_per_rank * 4); });
}

std::unique_ptr<Work> GlooCommunicator::all_to_all_bytes_async(const uint8_t* in, uint8_t* out,
                                                               int64_t bytes_per_rank) {
  BRIGADE_CHECK(bytes_per_rank >= 0) << "all_to_all_bytes: bytes_per_rank " << bytes_per_rank;
  GlooShared* s = shared_.get();
  return enqueue(
      OpDesc{OpKind::kAllToAll, bytes_per_rank * size(), {}},
      [s, in, out, bytes_per_rank] { return gloo_all_to_all(*s, in, out, bytes_per_rank); });
}

std::unique_ptr<Work> GlooCommunicator::all_to_all_v_async(const float* in,
                                                           std::span<const int64_t> send_counts,
                                                           float* out,
                                                           std::span<const int64_t> recv_counts) {
  GlooShared* s = shared_.get();
  std::vector<int64_t> sc = checked_counts(send_counts, "all_to_all_v send_counts");
  std::vector<int64_t> rc = checked_counts(recv_counts, "all_to_all_v recv_counts");
  BRIGADE_CHECK(sc[rank()] == rc[rank()]) << "all_to_all_v: rank " << rank() << " sends itself "
                                          << sc[rank()] << " but expects " << rc[rank()];
  int64_t total = 0;
  for (int64_t c : sc) total += c;
  return enqueue(OpDesc{OpKind::kAllToAllV, total * 4, {}},
                 [s, in, sc, out, rc] { return gloo_all_to_all_v(*s, in, sc, out, rc); });
}

std::unique_ptr<Work> GlooCommunicator::barrier_async() {
  GlooShared* s = shared_.get();
  return enqueue(OpDesc{OpKind::kBarrier, 0, {}}, [s] { return gloo_barrier(*s); });
}

std::unique_ptr<Work> GlooCommunicator::send_async(const void* data, int64_t bytes, int peer,
                                                   uint32_t tag) {
  return p2p(true, const_cast<void*>(data), bytes, peer, tag);
}

std::unique_ptr<Work> GlooCommunicator::recv_async(void* data, int64_t bytes, int peer,
                                                   uint32_t tag) {
  return p2p(false, data, bytes, peer, tag);
}

std::unique_ptr<Work> GlooCommunicator::p2p(bool is_send, void* data, int64_t bytes, int peer,
                                            uint32_t tag) {
  BRIGADE_CHECK(bytes >= 0 && (data != nullptr || bytes == 0)) << "send/recv: bytes " << bytes;
  BRIGADE_CHECK(peer >= 0 && peer < size() && peer != rank())
      << "send/recv: peer " << peer << " in a group of size " << size() << " from rank " << rank();
  auto st = std::make_shared<P2PState>();
  st->shared = shared_;
  st->op = OpDesc{is_send ? OpKind::kSend : OpKind::kRecv, bytes, {peer}};
  st->is_send = is_send;
  const uint64_t slot = kP2PSlotBase | tag;
  // The worker only posts the transfer (non-blocking in Gloo's TCP transport), keeping the
  // FIFO order with collectives without blocking later operations on the peer.
  P2PState* raw = st.get();
  st->posted = queue_.submit([raw, data, bytes, peer, slot] {
    GlooShared& s = *raw->shared;
    s.throw_if_broken(raw->op);
    try {
      auto buffer = s.context->createUnboundBuffer(data, static_cast<size_t>(bytes));
      if (raw->is_send) {
        buffer->send(peer, slot);
      } else {
        buffer->recv(peer, slot);
      }
      raw->buffer = std::move(buffer);
    } catch (...) {
      CommError e =
          make_comm_error(std::current_exception(), s, raw->op, std::chrono::milliseconds(0));
      s.mark_broken(e);
      throw e;
    }
  });
  return std::make_unique<P2PWork>(std::move(st));
}

}  // namespace brigade::detail
