#include "brigade/comm/comm_stats.h"

#include <cstdio>

namespace brigade {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce:
      return "all_reduce";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kAllGather:
      return "all_gather";
    case OpKind::kAllGatherV:
      return "all_gather_v";
    case OpKind::kAllGatherBytes:
      return "all_gather_bytes";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kAllToAll:
      return "all_to_all";
    case OpKind::kAllToAllV:
      return "all_to_all_v";
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kBarrier:
      return "barrier";
    case OpKind::kPush:
      return "push";
    case OpKind::kPull:
      return "pull";
  }
  return "unknown_op";
}

void CommStats::record(OpKind kind, int64_t bytes_sent, int64_t bytes_received, int64_t rounds) {
  Atomic& c = counters_[static_cast<int>(kind)];
  c.calls.fetch_add(1, std::memory_order_relaxed);
  c.sent.fetch_add(bytes_sent, std::memory_order_relaxed);
  c.received.fetch_add(bytes_received, std::memory_order_relaxed);
  c.rounds.fetch_add(rounds, std::memory_order_relaxed);
}

OpCounters CommStats::get(OpKind kind) const {
  const Atomic& c = counters_[static_cast<int>(kind)];
  return OpCounters{c.calls.load(std::memory_order_relaxed), c.sent.load(std::memory_order_relaxed),
                    c.received.load(std::memory_order_relaxed),
                    c.rounds.load(std::memory_order_relaxed)};
}

OpCounters CommStats::total() const {
  OpCounters t;
  for (int k = 0; k < kNumOpKinds; ++k) {
    t += get(static_cast<OpKind>(k));
  }
  return t;
}

void CommStats::reset() {
  for (Atomic& c : counters_) {
    c.calls.store(0, std::memory_order_relaxed);
    c.sent.store(0, std::memory_order_relaxed);
    c.received.store(0, std::memory_order_relaxed);
    c.rounds.store(0, std::memory_order_relaxed);
  }
}

namespace {
std::string human_bytes(int64_t b) {
  char buf[32];
  if (b < 1024) {
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(b));
  } else if (b < 1024 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  } else if (b < (int64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", b / (1024.0 * 1024.0));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
  }
  return buf;
}
}  // namespace

std::string CommStats::summary() const {
  std::string out;
  for (int k = 0; k < kNumOpKinds; ++k) {
    OpCounters c = get(static_cast<OpKind>(k));
    if (c.calls == 0) continue;
    out += op_kind_name(static_cast<OpKind>(k));
    out += ": " + std::to_string(c.calls) + " calls, " + std::to_string(c.rounds) +
           " rounds, sent " + human_bytes(c.bytes_sent) + ", received " +
           human_bytes(c.bytes_received) + "\n";
  }
  return out;
}

}  // namespace brigade
