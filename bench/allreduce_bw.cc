// All-reduce bandwidth over loopback: N processes (forked here) run Gloo ring all-reduces of
// 1 KiB .. 64 MiB of f32 through brigade's Communicator. Reports the time per call, the
// algorithm bandwidth (payload / time) and the bus bandwidth (algbw * 2(N-1)/N, the traffic
// each rank actually moves in a ring; nccl-tests' definition), and checks the byte counters
// against that formula.
//
//   build/release/bench/bench_allreduce_bw [--nproc N] [--max-mb M] [--bytes B]
// --bytes measures that one payload size only.
#include <sys/wait.h>
#include <unistd.h>

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

void run_rank(int rank, int nproc, const std::string& store_dir, int64_t min_bytes,
              int64_t max_bytes) {
  brigade::CommOptions o;
  o.rank = rank;
  o.size = nproc;
  o.store = std::make_shared<brigade::FileStore>(store_dir);
  o.timeout = std::chrono::seconds(60);
  auto comm = brigade::create_communicator(o);
  std::vector<float> data(static_cast<size_t>(max_bytes / 4), 1.0f);
  if (rank == 0) {
    std::printf("all_reduce (sum, f32, ring) over loopback, %d ranks\n", nproc);
    std::printf("%12s %12s %12s %12s %14s\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s",
                "sent/formula");
  }
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const int64_t n = bytes / 4;
    const int reps = bytes <= (1 << 20) ? 50 : (bytes <= (16 << 20) ? 10 : 4);
    comm->all_reduce(data.data(), n, brigade::ReduceOp::kSum);  // warm-up
    comm->barrier();
    comm->stats().reset();
    brigade::Stopwatch watch;
    for (int i = 0; i < reps; ++i) comm->all_reduce(data.data(), n, brigade::ReduceOp::kSum);
    double us = watch.seconds() * 1e6 / reps;
    double sent =
        static_cast<double>(comm->stats().get(brigade::OpKind::kAllReduce).bytes_sent) / reps;
    double formula = 2.0 * (nproc - 1) / nproc * static_cast<double>(bytes);
    double algbw = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
    if (rank == 0) {
      std::printf("%12lld %12.1f %12.3f %12.3f %14.4f\n", static_cast<long long>(bytes), us, algbw,
                  algbw * 2.0 * (nproc - 1) / nproc, sent / formula);
    }
    std::fill(data.begin(), data.end(), 1.0f);  // keep values finite across reps
  }
  comm->barrier();
}

}  // namespace

int main(int argc, char** argv) {
  int nproc = 2;
  int64_t min_bytes = 1024, max_bytes = int64_t{64} << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--nproc")) nproc = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--max-mb")) max_bytes = std::atoll(argv[i + 1]) << 20;
    if (!std::strcmp(argv[i], "--bytes")) min_bytes = max_bytes = std::atoll(argv[i + 1]) / 4 * 4;
  }
  char tmpl[] = "/tmp/brigade-bench-XXXXXX";
  std::string store_dir = mkdtemp(tmpl);
  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      try {
        run_rank(r, nproc, store_dir, min_bytes, max_bytes);
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
