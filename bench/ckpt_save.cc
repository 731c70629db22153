// Checkpoint save and load times for a ~25M-parameter model with AdamW state, 2 ranks.
//
// Layout (what a dp=2 ZeRO run holds): 25 parameter matrices of (1000, 1000) f32, each rank
// holding half of the rows (a box), and AdamW's m and v as flat tensors of 25M elements, each
// rank holding half (a flat range). Per rank 12.5M x 3 x 4 B = 150 MB; 300 MB per checkpoint.
//
// Each rank is a forked process; they talk over loopback Gloo with a file store. Measured on
// rank 0 (after one untimed warm-up save), median of --iters saves:
//   sync   ShardedCheckpointSaver::save: write + fsync + gather + commit; training waits for all.
//   async  AsyncCheckpointSaver::save (the blocking part: the snapshot copy) and the total until
//          wait() returns.
//   load   open_latest_valid + CRC verification (split over the ranks) + reading this rank's
//          pieces (2 ranks), and the same resharded onto 1 process (every tensor whole).
//
// With --layout ddp every rank holds every tensor whole (DDP: parameters and optimizer state
// replicated), and the sync save is timed twice, side by side: with the default plan, which
// splits each replicated tensor of at least 1 MiB into one block of rows per rank, and with
// the lowest rank writing everything (split_replicated_bytes = infinity), as before.
//
//   bench_ckpt_save [--dir DIR] [--iters 3] [--layout zero|ddp]
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/ckpt/async_save.h"
#include "brigade/ckpt/sharded_reader.h"
#include "brigade/ckpt/sharded_save.h"
#include "brigade/comm/comm_factory.h"
#include "brigade/comm/file_store.h"

namespace brigade {
namespace {

constexpr int kRanks = 2;
constexpr int kMatrices = 25;
constexpr int64_t kRows = 1000, kCols = 1000;
constexpr int64_t kParams = kMatrices * kRows * kCols;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<ShardPiece> pieces_of(int rank, bool replicated) {
  std::vector<ShardPiece> out;
  for (int i = 0; i < kMatrices; ++i) {
    out.push_back({"p" + std::to_string(i),
                   {kRows, kCols},
                   StDtype::kF32,
                   replicated ? Region::whole({kRows, kCols})
                              : Region::box({rank * kRows / kRanks, 0}, {kRows / kRanks, kCols})});
  }
  for (const char* name : {"adam.m", "adam.v"}) {
    out.push_back({name,
                   {kParams},
                   StDtype::kF32,
                   replicated
                       ? Region::range(0, kParams)
                       : Region::range(rank * kParams / kRanks, (rank + 1) * kParams / kRanks)});
  }
  return out;
}

// Median seconds of `iters` sync saves (after one untimed) with each of `options`, the
// savers taking turns (and alternating which goes first) so that drifting machine load and
// page-cache state hit them alike.
std::vector<double> time_sync_saves(const std::string& root, Communicator& world,
                                    const std::vector<ShardPiece>& pieces,
                                    std::span<const void* const> ptrs,
                                    const std::vector<CheckpointOptions>& options, int iters,
                                    int64_t& step) {
  std::vector<std::unique_ptr<ShardedCheckpointSaver>> savers;
  for (const CheckpointOptions& o : options) {
    savers.push_back(
        std::make_unique<ShardedCheckpointSaver>(root, world, pieces, nlohmann::json::object(), o));
    if (world.rank() == 0) {
      fmt::print("  (plan {}: rank 0 writes {:.0f} MB)\n", savers.size(),
                 savers.back()->plan().bytes_to_write() / 1e6);
    }
  }
  std::vector<std::vector<double>> seconds(savers.size());
  for (int i = 0; i <= iters; ++i) {
    for (size_t k = 0; k < savers.size(); ++k) {
      const size_t s = (k + static_cast<size_t>(i)) % savers.size();
      world.barrier();
      const auto t = Clock::now();
      const SaveResult r = savers[s]->save(++step, ptrs, {{"step", step}});
      if (!r.ok) throw CheckpointError(r.error);
      if (i > 0) seconds[s].push_back(seconds_since(t));
    }
  }
  std::vector<double> medians;
  for (auto& v : seconds) medians.push_back(median(v));
  return medians;
}

std::unique_ptr<Communicator> connect(const std::string& store, int rank, const char* name) {
  CommOptions o;
  o.rank = rank;
  o.size = kRanks;
  o.group_name = name;
  o.timeout = std::chrono::seconds(120);
  o.store = std::make_shared<FileStore>(store, o.timeout);
  return create_communicator(o);
}

void run_rank(int rank, const std::string& root, const std::string& store, int iters,
              bool replicated) {
  auto world = connect(store, rank, "world");
  auto ckpt = connect(store, rank, "ckpt");
  const std::vector<ShardPiece> pieces = pieces_of(rank, replicated);
  std::vector<std::vector<float>> data;
  std::vector<const void*> ptrs;
  for (const ShardPiece& p : pieces) {
    data.emplace_back(static_cast<size_t>(p.region.numel()), 0.5f + static_cast<float>(rank));
    ptrs.push_back(data.back().data());
  }
  int64_t step = 0;
  std::vector<double> async_block_s, async_total_s, load2_s, load1_s;
  std::vector<CheckpointOptions> plans = {CheckpointOptions{.keep_last = 2}};
  if (replicated) {
    plans.push_back(CheckpointOptions{.keep_last = 2, .split_replicated_bytes = INT64_MAX});
  }
  const std::vector<double> sync = time_sync_saves(root, *world, pieces, ptrs, plans, iters, step);
  const double sync_s = sync[0];
  const double sync_unsplit_s = replicated ? sync[1] : 0;
  {
    AsyncCheckpointSaver saver(root, *ckpt, pieces, nlohmann::json::object(),
                               CheckpointOptions{.keep_last = 2});
    for (int i = 0; i <= iters; ++i) {
      world->barrier();
      const auto t = Clock::now();
      saver.save(++step, ptrs, {{"step", step}});
      const double blocked = seconds_since(t);
      const auto r = saver.wait();
      if (!r || !r->ok) throw CheckpointError(r ? r->error : "no result");
      if (i > 0) {
        async_block_s.push_back(blocked);
        async_total_s.push_back(seconds_since(t));
      }
    }
  }
  for (int i = 0; i < iters; ++i) {
    world->barrier();
    auto t = Clock::now();
    {
      auto reader = ShardedCheckpointReader::open_latest_valid(root, world.get());
      for (size_t k = 0; k < pieces.size(); ++k) {
        reader->read(pieces[k].tensor, pieces[k].region, data[k].data(),
                     pieces[k].region.numel() * 4);
      }
    }
    world->barrier();
    load2_s.push_back(seconds_since(t));
    if (rank == 0) {  // resharding onto one process: every tensor whole
      t = Clock::now();
      auto reader = ShardedCheckpointReader::open_latest_valid(root);
      std::vector<float> whole(static_cast<size_t>(kParams));
      for (int m = 0; m < kMatrices; ++m) {
        reader->read_f32("p" + std::to_string(m), Region::whole({kRows, kCols}),
                         whole.data() + m * kRows * kCols, kRows * kCols);
      }
      for (const char* name : {"adam.m", "adam.v"}) {
        reader->read_f32(name, Region::whole({kParams}), whole.data(), kParams);
      }
      load1_s.push_back(seconds_since(t));
    }
    world->barrier();
  }
  if (rank != 0) return;
  const double mb = 3.0 * kParams * 4 / 1e6;
  fmt::print("checkpoint: {} params + AdamW m, v = {:.0f} MB over {} ranks ({}), median of {}\n",
             kParams, mb, kRanks, replicated ? "ddp: all replicated" : "zero: sharded", iters);
  fmt::print("| | training blocked (s) | total (s) | MB/s |\n|---|---|---|---|\n");
  fmt::print("| sync save | {:.3f} | {:.3f} | {:.0f} |\n", sync_s, sync_s, mb / sync_s);
  if (replicated) {
    fmt::print("| sync save, lowest rank writes all | {:.3f} | {:.3f} | {:.0f} |\n", sync_unsplit_s,
               sync_unsplit_s, mb / sync_unsplit_s);
  }
  fmt::print("| async save | {:.3f} | {:.3f} | {:.0f} |\n", median(async_block_s),
             median(async_total_s), mb / median(async_total_s));
  fmt::print("| load, 2 ranks (own pieces, CRC split) | | {:.3f} | {:.0f} |\n", median(load2_s),
             mb / median(load2_s));
  fmt::print("| load, resharded onto 1 process | | {:.3f} | {:.0f} |\n", median(load1_s),
             mb / median(load1_s));
}

}  // namespace
}  // namespace brigade

int main(int argc, char** argv) {
  CLI::App app{"sharded checkpoint save/load times"};
  std::string dir;
  int iters = 3;
  std::string layout = "zero";
  app.add_option("--dir", dir, "where to write (default: a new folder under /tmp)");
  app.add_option("--layout", layout, "zero: each rank holds half; ddp: every rank holds all")
      ->check(CLI::IsMember({"zero", "ddp"}));
  app.add_option("--iters", iters, "timed saves and loads (median reported)");
  CLI11_PARSE(app, argc, argv);
  std::string base = dir.empty() ? "/tmp" : dir;
  std::string tmpl = base + "/brigade-ckpt-bench-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string root = tmpl + "/ckpt", store = tmpl + "/store";
  std::vector<pid_t> pids;
  for (int r = 0; r < brigade::kRanks; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      try {
        brigade::run_rank(r, root, store, iters, layout == "ddp");
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] %s\n", r, e.what());
        ::_exit(1);
      }
      std::fflush(stdout);
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  return failed ? 1 : 0;
}
