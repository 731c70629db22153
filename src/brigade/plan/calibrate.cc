#include "brigade/plan/calibrate.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/base/host.h"
#include "brigade/comm/comm_factory.h"
#include "brigade/comm/file_store.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/model/batch.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/monitor/gemm_calibration.h"
#include "brigade/monitor/op_profiler.h"
#include "brigade/monitor/timer.h"
#include "brigade/plan/cost_model.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/train/model_factory.h"
#include "brigade/train/model_flops.h"
#include "brigade/train/trainer.h"
#include "brigade/train/training_data.h"

namespace brigade {

namespace {

double mem_total_gib() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemTotal:") return static_cast<double>(kib) / (1 << 20);
    meminfo.ignore(1 << 10, '\n');
  }
  return 0;
}

// A temporary folder, removed with the object.
struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/brigade-calibrate-XXXXXX";
    if (::mkdtemp(name) == nullptr) throw IoError("calibration: cannot create a temporary folder");
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Runs fn(i) on `threads` threads at once (each thread its own work), started together: the
// processes of a node compete for its cores, caches and memory so.
template <typename Fn>
void on_threads(int64_t threads, Fn&& fn) {
  std::latch start(threads);
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      start.arrive_and_wait();
      fn(i);
    });
  }
  for (std::thread& t : pool) t.join();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// FLOP/s one copy gets from forward + backward of the config's model on micro-batches of B
// random sequences while `threads` copies run at once: all the copies' FLOPs over the wall time
// of the whole run, per copy (a copy's fastest step would be one that ran while others waited).
// profile (optional): copy 0's seconds per step in GEMMs, attention and everything else (its op
// profiler).
struct StepProfile {
  double gemm_s = 0, attention_s = 0, other_s = 0;
};
double step_rate(const Config& config, int64_t B, int64_t threads, StepProfile* profile = nullptr) {
  std::vector<double> flops(static_cast<size_t>(threads));
  std::latch warm(threads);
  Stopwatch wall;
  on_threads(threads, [&](int64_t i) {
    std::unique_ptr<Model> model =
        make_model(config.model, B, config.train.recompute == RecomputeMode::kBlock);
    model->initialize(static_cast<uint64_t>(config.run.seed));
    Batch batch;
    batch.size = B;
    batch.seq_len = config.model.seq_len;
    const size_t n = static_cast<size_t>(B * batch.seq_len);
    std::mt19937 rng(static_cast<uint32_t>(i + 1));
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.model.vocab - 1));
    batch.tokens.resize(n);
    batch.targets.resize(n);
    for (size_t k = 0; k < n; ++k) {
      batch.tokens[k] = token(rng);
      batch.targets[k] = token(rng);
    }
    const auto step = [&] {
      model->zero_grads();
      model->forward(batch);
      model->backward(batch, 1.0f);
    };
    Stopwatch first;
    step();  // warm-up, and how many steps fill about 0.4 s
    const int reps = static_cast<int>(std::clamp(0.4 / first.seconds(), 3.0, 1000.0));
    OpProfiler profiler;
    if (i == 0) model->set_profiler(&profiler);
    warm.arrive_and_wait();
    if (i == 0) wall.reset();
    for (int rep = 0; rep < reps; ++rep) step();
    if (i == 0 && profile != nullptr) {
      const double gemm =
          profiler.total_ms(Op::kMatmulForward) + profiler.total_ms(Op::kMatmulBackward);
      const double attention =
          profiler.total_ms(Op::kAttentionForward) + profiler.total_ms(Op::kAttentionBackward);
      profile->gemm_s = gemm / 1e3 / reps;
      profile->attention_s = attention / 1e3 / reps;
      profile->other_s = (profiler.total_ms() - gemm - attention) / 1e3 / reps;
    }
    model->set_profiler(nullptr);
    flops[static_cast<size_t>(i)] =
        train_flops_per_example(config.model, model->num_params()) * static_cast<double>(B) * reps;
  });
  const double seconds = wall.seconds();
  double total = 0;
  for (double f : flops) total += f;
  return total / seconds / static_cast<double>(threads);
}

// One GEMM shape of the model: rows x in -> out (matmul_forward), and its FLOPs.
struct GemmShape {
  int64_t rows, in, out;
  double flops() const { return 2.0 * static_cast<double>(rows * in * out); }
};

// The GEMMs of a block and the head at every tp degree the model can be cut into (1, 2, 4, 8)
// and at micro-batches of 1 and B sequences: the shapes the layouts a search meets run.
std::vector<GemmShape> model_gemm_shapes(const GptConfig& m, int64_t B) {
  std::vector<GemmShape> out;
  const int64_t C = m.d_model;
  for (int tp : {1, 2, 4, 8}) {
    if (m.n_head % tp != 0 || (4 * C) % tp != 0) continue;
    const GptShard sh = make_gpt_shard(m, tp, 0);
    for (int64_t b : {int64_t{1}, B}) {
      const int64_t rows = b * m.seq_len;
      out.push_back({rows, C, 3 * sh.c_local});
      out.push_back({rows, sh.c_local, C});
      out.push_back({rows, C, sh.fc_local});
      out.push_back({rows, sh.fc_local, C});
      out.push_back({rows, C, sh.vocab_local});
    }
  }
  return out;
}

// Seconds of each shape's forward GEMM with `threads` copies running the same list at once
// (the median over copies of each one's mean over repetitions filling about 20 ms).
std::vector<double> time_gemms(const std::vector<GemmShape>& shapes, int64_t threads) {
  std::vector<std::vector<double>> seconds(shapes.size(), std::vector<double>(threads));
  on_threads(threads, [&](int64_t t) {
    for (size_t k = 0; k < shapes.size(); ++k) {
      const GemmShape& g = shapes[k];
      std::vector<float> a(static_cast<size_t>(g.rows * g.in), 0.5f);
      std::vector<float> w(static_cast<size_t>(g.out * g.in), 0.25f);
      std::vector<float> o(static_cast<size_t>(g.rows * g.out));
      Stopwatch first;
      matmul_forward(o.data(), a.data(), w.data(), nullptr, g.rows, g.in, g.out);
      const int reps = static_cast<int>(std::clamp(0.02 / first.seconds(), 3.0, 2000.0));
      Stopwatch watch;
      for (int r = 0; r < reps; ++r) {
        matmul_forward(o.data(), a.data(), w.data(), nullptr, g.rows, g.in, g.out);
      }
      seconds[k][static_cast<size_t>(t)] = watch.seconds() / reps;
    }
  });
  std::vector<double> out;
  for (auto& s : seconds) out.push_back(median(s));
  return out;
}

// A measurement of a cost that is a x1 + b x2 for unknown a, b.
struct CostPoint {
  double x1, x2, seconds;
};

// Least squares of seconds = a x1 + b x2 in relative error (each point weighted by 1 / seconds):
// {a, b}, which the caller checks for being physical.
std::pair<double, double> fit_cost(const std::vector<CostPoint>& points) {
  double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
  for (const CostPoint& p : points) {
    const double x1 = p.x1 / p.seconds, x2 = p.x2 / p.seconds;
    a11 += x1 * x1;
    a12 += x1 * x2;
    a22 += x2 * x2;
    b1 += x1;
    b2 += x2;
  }
  const double det = a11 * a22 - a12 * a12;
  return {(b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det};
}

// seconds = call + flops / rate over the shapes; where the fit is not physical (a negative call
// cost or rate), call = 0 and rate = the best seen.
void fit_gemm(const std::vector<GemmShape>& shapes, const std::vector<double>& seconds,
              double* call_s, double* rate) {
  std::vector<CostPoint> points;
  double best = 0;
  for (size_t k = 0; k < shapes.size(); ++k) {
    points.push_back({1.0, shapes[k].flops(), seconds[k]});
    best = std::max(best, shapes[k].flops() / seconds[k]);
  }
  const auto [call, inv_rate] = fit_cost(points);
  if (call >= 0 && inv_rate > 0) {
    *call_s = call;
    *rate = 1 / inv_rate;
  } else {
    *call_s = 0;
    *rate = best;
  }
}

// GB/s one copy gets from an AdamW-like update over 4 Mi floats (reads p, g, m, v; writes p,
// m, v) while `threads` copies run at once.
double update_stream_gbs(int64_t threads) {
  constexpr size_t n = size_t{1} << 22;
  constexpr int kReps = 8;
  std::latch ready(threads);
  Stopwatch wall;
  on_threads(threads, [&](int64_t i) {
    std::vector<float> p(n, 1.0f), g(n, 0.5f), m(n, 0.0f), v(n, 0.0f);
    ready.arrive_and_wait();  // the buffers are touched; time the streams alone
    if (i == 0) wall.reset();
    for (int rep = 0; rep < kReps; ++rep) {
      for (size_t k = 0; k < n; ++k) {
        m[k] = 0.9f * m[k] + 0.1f * g[k];
        v[k] = 0.95f * v[k] + 0.05f * g[k] * g[k];
        p[k] -= 1e-3f * m[k] / (v[k] + 1e-8f);
      }
    }
    if (p[n / 2] == 42.0f) std::fputs("", stdout);  // keeps the loops
  });
  return 7.0 * 4.0 * static_cast<double>(n) * kReps / wall.seconds() / 1e9 /
         static_cast<double>(threads);
}

struct Loopback {
  double rtt_us = 0;
  double gbit = 0;
};

void set_timeout(int fd) {
  timeval tv{.tv_sec = 10, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool full_io(int fd, char* data, size_t bytes, bool sending) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t k = sending ? ::send(fd, data + done, bytes - done, MSG_NOSIGNAL)
                              : ::recv(fd, data + done, bytes - done, 0);
    if (k <= 0) return false;
    done += static_cast<size_t>(k);
  }
  return true;
}

// TCP over 127.0.0.1 between two threads of this process (a one-process job has no
// collective; this is its link to anything on the machine). Every wait is bounded (10 s).
Loopback measure_loopback() {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (listener >= 0) ::close(listener);
    throw IoError(fmt::format("calibration: cannot listen on 127.0.0.1: {}", std::strerror(errno)));
  }
  constexpr int kPings = 200;
  constexpr size_t kBulk = size_t{64} << 20, kChunk = size_t{1} << 20;
  std::thread echo([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    set_timeout(fd);
    char b = 0;
    for (int i = 0; i < kPings; ++i) {
      if (!full_io(fd, &b, 1, false) || !full_io(fd, &b, 1, true)) break;
    }
    std::vector<char> sink(kChunk);
    for (size_t got = 0; got < kBulk; got += kChunk) {
      if (!full_io(fd, sink.data(), kChunk, false)) break;
    }
    full_io(fd, &b, 1, true);
    ::close(fd);
  });
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  set_timeout(fd);
  Loopback out;
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  char b = 1;
  Stopwatch pings;
  for (int i = 0; ok && i < kPings; ++i) ok = full_io(fd, &b, 1, true) && full_io(fd, &b, 1, false);
  out.rtt_us = pings.seconds() / kPings * 1e6;
  std::vector<char> data(kChunk, 7);
  Stopwatch bulk;
  for (size_t sent = 0; ok && sent < kBulk; sent += kChunk) {
    ok = full_io(fd, data.data(), kChunk, true);
  }
  ok = ok && full_io(fd, &b, 1, false);
  out.gbit = static_cast<double>(kBulk) * 8 / bulk.seconds() / 1e9;
  ::close(fd);
  if (!ok) ::shutdown(listener, SHUT_RDWR);  // an accept still waiting returns
  echo.join();
  ::close(listener);
  if (!ok) throw IoError("calibration: the loopback transfer failed or timed out");
  return out;
}

// The ring all-reduce among `ranks` threads of this process over loopback (Gloo, as the job's
// processes run it), fitted to the cost model's seconds = rounds x RTT + bytes / bandwidth in
// relative error over 1,024 floats, the model's activations of one micro-batch (what tensor
// parallelism all-reduces) and 4 Mi floats. Every wait is bounded (the communicators' 30 s).
LinkSpec measure_all_reduce(int64_t ranks, int64_t medium_floats, double* communicator_mib) {
  const TempDir dir;
  constexpr int64_t kSmall = 1024, kLarge = int64_t{1} << 22;
  const int64_t medium = std::clamp<int64_t>(medium_floats, kSmall * 4, kLarge / 4);
  const size_t n = static_cast<size_t>(ranks);
  std::vector<double> small_s(n), medium_s(n), large_s(n), loaded_s(n);
  std::string failure;
  std::mutex failure_mutex;
  std::latch connected(ranks);
  const double before = resident_bytes();
  double after = 0;
  on_threads(ranks, [&](int64_t r) {
    try {
      CommOptions o;
      o.rank = static_cast<int>(r);
      o.size = static_cast<int>(ranks);
      o.group_name = "calibrate";
      o.timeout = std::chrono::seconds(30);
      o.store = std::make_shared<FileStore>(dir.path, o.timeout);
      std::unique_ptr<Communicator> comm = create_communicator(o);
      std::vector<float> data(static_cast<size_t>(kLarge), 1.0f);
      const auto timed = [&](int64_t floats, int reps) {
        comm->barrier();
        Stopwatch watch;
        for (int i = 0; i < reps; ++i) comm->all_reduce(data.data(), floats, ReduceOp::kSum);
        return watch.seconds() / reps;
      };
      timed(kSmall, 5);  // warm-up: the pairs connect
      timed(kLarge, 1);  // and their buffers grow to the largest message
      connected.arrive_and_wait();
      if (r == 0) after = resident_bytes();
      small_s[static_cast<size_t>(r)] = timed(kSmall, 50);
      medium_s[static_cast<size_t>(r)] = timed(medium, 20);
      large_s[static_cast<size_t>(r)] = timed(kLarge, 4);
      // As tensor parallelism meets it: each all-reduce between two GEMMs of the rows it sums,
      // so the ranks arrive from compute (caches cold, peers a little apart).
      const int64_t rows = std::max<int64_t>(1, medium / 128);
      std::vector<float> a(static_cast<size_t>(rows * 128), 0.5f), w(128 * 512, 0.25f),
          product(static_cast<size_t>(rows * 512));
      comm->barrier();
      double in_collective = 0;
      constexpr int kLoaded = 200;  // enough to meet the scheduler's stalls as often as a step does
      for (int i = 0; i < kLoaded; ++i) {
        matmul_forward(product.data(), a.data(), w.data(), nullptr, rows, 128, 512);
        Stopwatch watch;
        comm->all_reduce(data.data(), medium, ReduceOp::kSum);
        in_collective += watch.seconds();
      }
      loaded_s[static_cast<size_t>(r)] = in_collective / kLoaded;
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      failure = e.what();
    }
  });
  if (!failure.empty()) throw IoError("calibration: the loopback all-reduce failed: " + failure);
  // What one rank's communicator holds (its pairs, buffers and threads), less the data vector
  // every thread here allocated for the test.
  *communicator_mib = std::max(0.0, (after - before) / static_cast<double>(ranks) -
                                        4.0 * static_cast<double>(kLarge)) /
                      (1 << 20);
  const int world = static_cast<int>(ranks);
  std::vector<CostPoint> points;
  for (const auto& [floats, times] :
       {std::pair{kSmall, &small_s}, std::pair{medium, &medium_s}, std::pair{kLarge, &large_s}}) {
    const Traffic t = all_reduce_f32_traffic(floats, world, 0);
    points.push_back({static_cast<double>(t.rounds), static_cast<double>(t.sent), median(*times)});
  }
  auto [rtt, inv_bw] = fit_cost(points);
  if (!(rtt > 0) || !(inv_bw > 0)) {  // a degenerate fit: the two ends alone
    const Traffic small = all_reduce_f32_traffic(kSmall, world, 0);
    const Traffic large = all_reduce_f32_traffic(kLarge, world, 0);
    rtt = median(small_s) / static_cast<double>(small.rounds);
    inv_bw = std::max(1e-15, median(large_s) - rtt * static_cast<double>(large.rounds)) /
             static_cast<double>(large.sent);
  }
  // Between computations a collective waits longer than back to back (the peers arrive apart,
  // the threads wake): the extra time of the loaded medium all-reduce goes to its rounds.
  const Traffic mid = all_reduce_f32_traffic(medium, world, 0);
  const double loaded = median(loaded_s), idle = median(medium_s);
  if (loaded > idle) rtt += (loaded - idle) / static_cast<double>(mid.rounds);
  LinkSpec link;
  link.latency_us = rtt * 1e6;
  link.bandwidth_gbit = 8 / inv_bw / 1e9;
  return link;
}

}  // namespace

ClusterSpec calibrate_this_machine(const Config& config, int64_t processes_per_node,
                                   const std::function<void(const std::string&)>& log) {
  ClusterSpec c;
  c.devices_per_node = std::max<int64_t>(1, std::thread::hardware_concurrency());
  c.processes_per_node = processes_per_node > 0 ? processes_per_node : c.devices_per_node;
  const int64_t P = c.processes_per_node, D = c.devices_per_node;
  c.device.memory_gib = mem_total_gib() / static_cast<double>(D);
  c.device.watts = config.monitor.core_watts;

  // A trainer holds its data and warmed-up kernels before it builds a model: so does this
  // process before the overhead is read (the peak, as the run summary reports it).
  Config f32 = config;
  f32.train.precision = "f32";
  f32.train.blas_threads = 1;
  configure_kernels(f32.train);
  c.device.peak_flops = measure_gemm_peak_flops();
  {
    const TempDir folder;
    const TrainingData data = load_training_data(config, RunFolder{.root = folder.path});
    c.process_overhead_mib = peak_resident_mib();
  }
  log(fmt::format("process with its data, before a model: {:.1f} MiB peak resident",
                  c.process_overhead_mib));

  // Rates per device: one copy per core at once (min(P, D)), so the competition for the node's
  // memory is in them; the model shares a device among P > D processes by time.
  const int64_t copies = std::min(P, D);
  const int64_t B2 = std::max<int64_t>(4, config.train.micro_batch);
  const GptConfig gpt = gpt_config(config.model);
  // The GEMMs at the model's shapes give the cost of a call and the rate; a real step's profile
  // then scales them to what its GEMMs took there (caches shared with the rest of the step),
  // and gives attention's rate and the other kernels'.
  const auto calibrate_gemms = [&](const Config& precision, double* rate, double* call_s,
                                   StepProfile* profile) {
    const std::vector<GemmShape> shapes = model_gemm_shapes(gpt, B2);
    fit_gemm(shapes, time_gemms(shapes, copies), call_s, rate);
    const double flops = step_rate(precision, B2, copies, profile);
    int moe_blocks = 0;
    for (int64_t l = 0; l < gpt.n_layer; ++l) moe_blocks += gpt.moe_block(l) ? 1 : 0;
    const ChunkWork whole =
        chunk_work(gpt, make_gpt_shard(gpt, 1, 0), B2, static_cast<int>(gpt.n_layer), moe_blocks,
                   true, true, gpt.n_experts);
    double predicted = 0;
    for (double f : whole.gemm_calls) predicted += 3 * (*call_s + f / *rate);
    const double k = profile->gemm_s / predicted;
    *call_s *= k;
    *rate /= k;
    return std::pair{flops, whole};
  };
  StepProfile profile;
  double call_s = 0;
  const auto [flops, whole] = calibrate_gemms(f32, &c.device.gemm_flops, &call_s, &profile);
  c.device.gemm_call_us = call_s * 1e6;
  c.device.gemm_flops = std::min(c.device.gemm_flops, c.device.peak_flops);
  c.device.attention_flops = 3 * whole.attention_flops / profile.attention_s;
  c.device.elementwise_gbs =
      (whole.elementwise_fwd + whole.elementwise_bwd) / profile.other_s / 1e9;
  log(fmt::format(
      "f32: GEMM peak {:.1f} GFLOP/s; a training step of B = {} on {} core(s) at once: {:.1f} "
      "GFLOP/s per core, of which GEMMs {:.1f} ms (at the model's shapes: {:.1f} us per call + "
      "{:.1f} GFLOP/s), attention {:.1f} ms ({:.1f} GFLOP/s), the rest {:.1f} ms ({:.1f} GB/s)",
      c.device.peak_flops / 1e9, B2, copies, flops / 1e9, 1e3 * profile.gemm_s,
      c.device.gemm_call_us, c.device.gemm_flops / 1e9, 1e3 * profile.attention_s,
      c.device.attention_flops / 1e9, 1e3 * profile.other_s, c.device.elementwise_gbs));
  if (P > D) {  // the throughput all P copies get together, against one copy per core
    c.sharing_efficiency = std::clamp(
        step_rate(f32, B2, P) * static_cast<double>(P) / (flops * static_cast<double>(D)), 0.01,
        1.0);
    log(fmt::format("{} processes on {} cores keep {:.0f}% of the cores' throughput", P, D,
                    100 * c.sharing_efficiency));
  }
  Config bf16 = f32;
  bf16.train.precision = "bf16";
  try {
    configure_kernels(bf16.train);
    c.device.peak_flops_bf16 = measure_gemm_peak_flops();
    StepProfile bf16_profile;
    double bf16_call = 0;
    calibrate_gemms(bf16, &c.device.gemm_flops_bf16, &bf16_call, &bf16_profile);
    c.device.gemm_flops_bf16 = std::min(c.device.gemm_flops_bf16, c.device.peak_flops_bf16);
    log(fmt::format("bf16: GEMM peak {:.1f} GFLOP/s; at the model's shapes {:.1f} GFLOP/s",
                    c.device.peak_flops_bf16 / 1e9, c.device.gemm_flops_bf16 / 1e9));
  } catch (const ConfigError& e) {
    log(fmt::format("bf16: none on this machine ({})", e.what()));
  }
  configure_kernels(f32.train);
  c.device.memory_bandwidth_gbs = update_stream_gbs(copies);
  log(fmt::format("optimizer-like stream: {:.1f} GB/s per core, {} at once",
                  c.device.memory_bandwidth_gbs, copies));
  // The cores that compute also run the collectives' copies and sums: backward hides an
  // average only where a core is left over.
  c.device.comm_overlap = std::clamp(static_cast<double>(D - P) / static_cast<double>(P), 0.0, 1.0);
  // The link between processes that each have a core (the model stretches it where they share).
  if (copies > 1) {
    c.node_link = measure_all_reduce(copies, config.train.micro_batch * gpt.seq_len * gpt.d_model,
                                     &c.communicator_mib);
    log(fmt::format(
        "all-reduce among {} processes over loopback: round trip {:.1f} us, {:.2f} "
        "Gbit/s; a communicator holds {:.1f} MiB per rank",
        copies, c.node_link.latency_us, c.node_link.bandwidth_gbit, c.communicator_mib));
  } else {
    const Loopback link = measure_loopback();
    c.node_link.latency_us = link.rtt_us;
    c.node_link.bandwidth_gbit = link.gbit;
    log(fmt::format("loopback TCP: round trip {:.1f} us, {:.1f} Gbit/s", link.rtt_us, link.gbit));
  }
  return c;
}

}  // namespace brigade
