#pragma once
// State of one Gloo communicator shared by the communicator, its worker thread and in-flight
// point-to-point Work handles (internal), plus the operation descriptions used in errors.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/comm/comm_stats.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace brigade::detail {

// Where a member process runs; published in the store at rendezvous and used to tell which
// peer died when an operation fails.
struct PeerInfo {
  std::string host;
  int64_t pid = -1;
};

// What an operation was, for error messages.
struct OpDesc {
  OpKind kind = OpKind::kBarrier;
  int64_t bytes = 0;       // this rank's payload
  std::vector<int> peers;  // ranks it talks to directly; empty = all
};

struct GlooShared {
  int rank = 0;
  int size = 1;
  std::string name;
  std::chrono::milliseconds timeout{0};
  std::string host;  // this machine's hostname
  std::vector<PeerInfo> peers;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::Context> context;  // null when size == 1
  CommStats stats;

  // The first failure; once set, every later operation fails with it.
  void mark_broken(const CommError& error);
  // Throws CommError if an earlier operation failed.
  void throw_if_broken(const OpDesc& op);

  // Scratch buffers, grown as needed and used only by the worker thread.
  std::vector<float> f32_scratch;
  std::vector<uint16_t> wire;
  std::vector<uint16_t> rows;
  std::vector<uint16_t> mine;

 private:
  std::mutex broken_mu_;
  bool broken_ = false;
  CommError::Kind broken_kind_ = CommError::Kind::kOther;
  std::string broken_message_;
};

// Turns what an operation threw into the CommError the caller sees: names the operation, the
// group, this rank, the peers involved and any peer process known to be gone.
CommError make_comm_error(std::exception_ptr error, const GlooShared& s, const OpDesc& op,
                          std::chrono::milliseconds elapsed);

// Kind of failure an exception stands for (timeout, lost peer, other); *cause gets its text.
CommError::Kind classify_error(std::exception_ptr error, std::string* cause);

// Ranks whose process is known to have exited (only peers on this host can be checked).
std::vector<int> dead_peers(const GlooShared& s);

}  // namespace brigade::detail

namespace brigade {
struct CommOptions;
}

namespace brigade::detail {
// Rendezvous and connection (gloo_connect.cc): fills s.host, s.peers, s.device and s.context
// (the latter two only when s.size > 1). s.rank, s.size, s.name, s.timeout must be set.
void gloo_connect(GlooShared& s, const CommOptions& options);
}  // namespace brigade::detail
