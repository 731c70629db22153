// All-reduce bandwidth over loopback: N processes (forked here) run Gloo ring all-reduces of
// 1 KiB .. 64 MiB of f32 through brigade's Communicator. Reports the time per call, the
// algorithm bandwidth (payload / time) and the bus bandwidth (algbw * 2(N-1)/N, the traffic
// each rank actually moves in a ring; nccl-tests' definition), and checks the byte counters
// against that formula.
//
//   build/release/bench/bench_allreduce_bw [--nproc N] [--max-mb M] [--bytes B] [--tls]
// --bytes measures that one payload size only. --tls measures plain TCP and TLS 1.3
// (comm.transport = "tls") side by side: both groups are connected up front and every size
// alternates between them for --rounds rounds (default 3), reporting medians and their ratio.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "brigade/comm/comm_factory.h"
#include "brigade/comm/file_store.h"
#include "brigade/monitor/timer.h"

namespace {

struct Options {
  int nproc = 2;
  int64_t min_bytes = 1024, max_bytes = int64_t{64} << 20;
  bool tls = false;
  int rounds = 3;
};

std::unique_ptr<brigade::Communicator> connect(int rank, const Options& opt,
                                               const std::string& store_dir, bool tls) {
  brigade::CommOptions o;
  o.rank = rank;
  o.size = opt.nproc;
  o.group_name = tls ? "tls" : "tcp";
  o.store = std::make_shared<brigade::FileStore>(store_dir);
  o.timeout = std::chrono::seconds(60);
  if (tls) {
    auto security = std::make_shared<brigade::PeerSecurity>();
    security->identity = brigade::PeerIdentity::generate();
    o.security = security;
  }
  return brigade::create_communicator(o);
}

// Microseconds per all-reduce of `bytes` (after a warm-up), and the counted bytes sent per call.
double time_all_reduce(brigade::Communicator& comm, std::vector<float>& data, int64_t bytes,
                       double* sent) {
  const int64_t n = bytes / 4;
  const int reps = bytes <= (1 << 20) ? 50 : (bytes <= (16 << 20) ? 10 : 4);
  comm.all_reduce(data.data(), n, brigade::ReduceOp::kSum);  // warm-up
  comm.barrier();
  comm.stats().reset();
  brigade::Stopwatch watch;
  for (int i = 0; i < reps; ++i) comm.all_reduce(data.data(), n, brigade::ReduceOp::kSum);
  const double us = watch.seconds() * 1e6 / reps;
  *sent = static_cast<double>(comm.stats().get(brigade::OpKind::kAllReduce).bytes_sent) / reps;
  std::fill(data.begin(), data.end(), 1.0f);  // keep values finite across reps
  return us;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run_rank(int rank, const Options& opt, const std::string& store_dir) {
  auto tcp = connect(rank, opt, store_dir, false);
  auto tls = opt.tls ? connect(rank, opt, store_dir, true) : nullptr;
  std::vector<float> data(static_cast<size_t>(opt.max_bytes / 4), 1.0f);
  const double ring = 2.0 * (opt.nproc - 1) / opt.nproc;
  if (rank == 0) {
    std::printf("all_reduce (sum, f32, ring) over loopback, %d ranks%s\n", opt.nproc,
                opt.tls ? ", plain TCP and TLS 1.3 alternating" : "");
    std::printf("%12s %12s %12s %12s %14s", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s",
                "sent/formula");
    if (opt.tls) std::printf(" %12s %12s %10s", "tls_time_us", "tls_busbw", "tls/tcp");
    std::printf("\n");
  }
  for (int64_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= 4) {
    std::vector<double> tcp_us, tls_us;
    double sent = 0, tls_sent = 0;
    for (int round = 0; round < (opt.tls ? opt.rounds : 1); ++round) {
      tcp_us.push_back(time_all_reduce(*tcp, data, bytes, &sent));
      if (tls) tls_us.push_back(time_all_reduce(*tls, data, bytes, &tls_sent));
    }
    const double us = median(tcp_us);
    const double algbw = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
    if (rank == 0) {
      std::printf("%12lld %12.1f %12.3f %12.3f %14.4f", static_cast<long long>(bytes), us, algbw,
                  algbw * ring, sent / (ring * static_cast<double>(bytes)));
      if (tls) {
        const double t = median(tls_us);
        std::printf(" %12.1f %12.3f %10.2f", t,
                    static_cast<double>(bytes) / (t * 1e-6) / 1e9 * ring, t / us);
      }
      std::printf("\n");
    }
  }
  tcp->barrier();
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--tls")) {
      opt.tls = true;
      continue;
    }
    if (i + 1 >= argc) break;
    if (!std::strcmp(argv[i], "--nproc")) opt.nproc = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--max-mb")) opt.max_bytes = std::atoll(argv[i + 1]) << 20;
    if (!std::strcmp(argv[i], "--rounds")) opt.rounds = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--bytes")) {
      opt.min_bytes = opt.max_bytes = std::atoll(argv[i + 1]) / 4 * 4;
    }
    ++i;
  }
  const int nproc = opt.nproc;
  char tmpl[] = "/tmp/brigade-bench-XXXXXX";
  std::string store_dir = mkdtemp(tmpl);
  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      try {
        run_rank(r, opt, store_dir);
        std::fflush(stdout);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        _exit(1);
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::system(("rm -rf " + store_dir).c_str());
  return failed ? 1 : 0;
}
