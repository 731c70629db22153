// The byte counters are derived from the algorithms Gloo runs, not measured by Gloo. This test
// measures: it reads the kernel's per-socket TCP counters around each operation (TCP_INFO:
// bytes_sent minus bytes_retrans, i.e. unique bytes transmitted, and bytes_received, summed over
// the TCP sockets of the process that exist before and after) and requires
//     0 <= kernel bytes - derived payload bytes <= framing slack
// The slack covers Gloo's 48-byte message preambles, its rendezvous notifications and the
// barrier that fences each measurement, a few KiB at most; the payloads are hundreds of KiB to
// 12 MiB, so a wrong formula (a chunk counted twice, the wrong ring phase, a Gloo version that
// forwards more segments) fails by far more than the slack.
#include <dirent.h>
#include <gtest/gtest.h>
#include <linux/tcp.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdlib>
#include <map>
#include <thread>

#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::measure;

constexpr int64_t kSlack = 16 * 1024;
constexpr socklen_t kNeeded = offsetof(tcp_info, tcpi_bytes_retrans) + sizeof(uint64_t);

struct KernelBytes {
  int64_t sent = 0;  // unique payload bytes transmitted (a retransmission under load is not new)
  int64_t received = 0;
};

// Counters of every TCP socket this process has open, keyed by socket inode.
std::map<ino_t, KernelBytes> tcp_sockets() {
  std::map<ino_t, KernelBytes> out;
  DIR* dir = ::opendir("/proc/self/fd");
  BRIGADE_CHECK(dir != nullptr) << "cannot list /proc/self/fd";
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || fd == ::dirfd(dir)) continue;
    tcp_info info{};
    socklen_t len = sizeof(info);
    struct stat st;
    if (::getsockopt(static_cast<int>(fd), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) continue;
    if (len < kNeeded || ::fstat(static_cast<int>(fd), &st) != 0) continue;
    out[st.st_ino] =
        KernelBytes{static_cast<int64_t>(info.tcpi_bytes_sent - info.tcpi_bytes_retrans),
                    static_cast<int64_t>(info.tcpi_bytes_received)};
  }
  ::closedir(dir);
  return out;
}

// Growth of the counters between two snapshots, over the sockets present in both.
KernelBytes growth(const std::map<ino_t, KernelBytes>& before,
                   const std::map<ino_t, KernelBytes>& after) {
  KernelBytes d;
  for (const auto& [ino, b] : before) {
    auto it = after.find(ino);
    if (it == after.end()) continue;
    d.sent += it->second.sent - b.sent;
    d.received += it->second.received - b.received;
  }
  return d;
}

bool kernel_reports_bytes_sent() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  tcp_info info{};
  socklen_t len = sizeof(info);
  bool ok = ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 && len >= kNeeded;
  ::close(fd);
  return ok;
}

// Runs op between two fences and compares the kernel's byte counts with the derived ones.
template <typename Op>
void expect_matches_kernel(Communicator& comm, const char* what, OpKind kind, Op&& op) {
  comm.barrier();
  std::this_thread::sleep_for(20ms);  // stray notifications of the fence land before we read
  const auto before = tcp_sockets();
  const Traffic derived = measure(comm, kind, op);
  comm.barrier();  // every peer finished: everything this rank sent has been transmitted
  std::this_thread::sleep_for(20ms);
  const KernelBytes d = growth(before, tcp_sockets());
  const int64_t sent = d.sent, received = d.received;
  if (std::getenv("WIRE_DEBUG")) {  // WIRE_DEBUG=1: print every measurement
    std::fprintf(stderr,
                 "[rank %d] %-18s kernel %10lld/%10lld derived %10lld/%10lld diff %6lld/%6lld\n",
                 comm.rank(), what, (long long)sent, (long long)received, (long long)derived.sent,
                 (long long)derived.received, (long long)(sent - derived.sent),
                 (long long)(received - derived.received));
  }
  EXPECT_GE(sent - derived.sent, 0)
      << what << ": kernel sent " << sent << ", derived " << derived.sent;
  EXPECT_LE(sent - derived.sent, kSlack)
      << what << ": kernel sent " << sent << ", derived " << derived.sent;
  EXPECT_GE(received - derived.received, 0)
      << what << ": kernel received " << received << ", derived " << derived.received;
  EXPECT_LE(received - derived.received, kSlack)
      << what << ": kernel received " << received << ", derived " << derived.received;
  EXPECT_GT(derived.sent + derived.received, 0) << what << " moved no payload";
}

void run_all_ops(Communicator& comm) {
  const int N = comm.size(), r = comm.rank();
  {
    std::vector<float> v(1 << 18, 1.f);
    expect_matches_kernel(comm, "all_reduce 1 MiB", OpKind::kAllReduce,
                          [&] { comm.all_reduce(v.data(), v.size(), ReduceOp::kSum); });
    // 12 MiB: more than two 1 MiB segments per rank, uneven tail.
    std::vector<float> big(3 * (1 << 20) + 5, 1.f);
    expect_matches_kernel(comm, "all_reduce 12 MiB", OpKind::kAllReduce,
                          [&] { comm.all_reduce(big.data(), big.size(), ReduceOp::kSum); });
    std::vector<float> w((1 << 18) + 1, 1.f);
    expect_matches_kernel(comm, "all_reduce bf16", OpKind::kAllReduce, [&] {
      comm.all_reduce(w.data(), w.size(), ReduceOp::kAvg, WireDtype::kBF16);
    });
  }
  {
    const int64_t n = (1 << 16) + 3;
    std::vector<float> in(N * n, 1.f), out(n);
    expect_matches_kernel(comm, "reduce_scatter", OpKind::kReduceScatter,
                          [&] { comm.reduce_scatter(in.data(), out.data(), n, ReduceOp::kSum); });
  }
  {
    const int64_t n = (1 << 16) + 1;
    std::vector<float> in(n, 1.f), out(N * n);
    expect_matches_kernel(comm, "all_gather", OpKind::kAllGather,
                          [&] { comm.all_gather(in.data(), out.data(), n); });
    std::vector<int64_t> counts(N);
    int64_t total = 0;
    for (int p = 0; p < N; ++p) total += counts[p] = p == 1 ? 0 : (1 << 16) >> p;
    std::vector<float> vin(counts[r], 2.f), vout(total);
    expect_matches_kernel(comm, "all_gather_v", OpKind::kAllGatherV,
                          [&] { comm.all_gather_v(vin.data(), vout.data(), counts); });
  }
  {
    std::vector<float> v(1 << 18, 3.f);
    expect_matches_kernel(comm, "broadcast", OpKind::kBroadcast,
                          [&] { comm.broadcast(v.data(), v.size(), 1); });
  }
  {
    const int64_t n = 1 << 16;
    std::vector<float> in(N * n, 1.f), out(N * n);
    expect_matches_kernel(comm, "all_to_all", OpKind::kAllToAll,
                          [&] { comm.all_to_all(in.data(), out.data(), n); });
    std::vector<uint8_t> bin(N * 100003, 7), bout(N * 100003);
    expect_matches_kernel(comm, "all_to_all_bytes", OpKind::kAllToAll,
                          [&] { comm.all_to_all_bytes(bin.data(), bout.data(), 100003); });
    auto cnt = [](int s, int d) { return int64_t{1000} * ((s + 2 * d) % 5) * 13; };
    std::vector<int64_t> sc(N), rc(N);
    int64_t st = 0, rt = 0;
    for (int p = 0; p < N; ++p) st += sc[p] = cnt(r, p), rt += rc[p] = cnt(p, r);
    std::vector<float> vin(st, 1.f), vout(rt);
    expect_matches_kernel(comm, "all_to_all_v", OpKind::kAllToAllV,
                          [&] { comm.all_to_all_v(vin.data(), sc, vout.data(), rc); });
  }
  {
    // Only rank 0 sends and only rank 1 receives, so each side sees one direction.
    std::vector<char> buf(1 << 18, 'x');
    if (r == 0) {
      expect_matches_kernel(comm, "send", OpKind::kSend,
                            [&] { comm.send(buf.data(), buf.size(), 1, 3); });
    } else if (r == 1) {
      expect_matches_kernel(comm, "recv", OpKind::kRecv,
                            [&] { comm.recv(buf.data(), buf.size(), 0, 3); });
    } else {
      comm.barrier();  // mirror the two fences of the others
      comm.barrier();
    }
  }
}

class WireBytesMpTest : public ::testing::TestWithParam<int> {};

TEST_P(WireBytesMpTest, DerivedCountsMatchKernelTcpCounters) {
  ASSERT_TRUE(kernel_reports_bytes_sent())
      << "this kernel's TCP_INFO lacks tcpi_bytes_sent/bytes_retrans (Linux >= 5.5 needed)";
  const int world = GetParam();
  testutil::TempDir dir;
  auto result = testutil::run_ranks(world, 60s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, world, 5s);
    run_all_ops(*comm);
    comm->barrier();  // keep every socket open until all ranks have measured
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, WireBytesMpTest, ::testing::Values(3, 4));

}  // namespace
}  // namespace brigade
