// Schedule simulator: structural checks, then a fixed-point timing pass. Each pass walks every
// rank forward as far as its received messages allow; an action's start is
//   max(end of the rank's previous action, end of the matching send + latency),
// which depends only on actions already timed, so the result does not depend on the walk order.
// A pass that moves no rank while actions remain is a deadlock.
#include "brigade/parallel/pipeline/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

#include "brigade/base/error.h"

namespace brigade {

namespace {

std::string name_of(const Action& a, int rank) {
  std::ostringstream out;
  out << "rank " << rank << " " << action_kind_name(a.kind) << " mb " << a.mb << " chunk "
      << a.chunk;
  return out.str();
}

[[noreturn]] void reject(const std::string& why) {
  throw ConfigError("pipeline schedule invalid: " + why);
}

// Per rank: each (mb, chunk) forwarded, input-gradient and weight-gradient passes once each, in
// that order along the list.
void check_structure(const Schedule& s) {
  const int p = s.shape.ranks, m = s.shape.micro_batches, v = s.shape.virtual_stages;
  if (static_cast<int>(s.ranks.size()) != p)
    reject(std::to_string(s.ranks.size()) + " action lists for " + std::to_string(p) + " ranks");
  for (int r = 0; r < p; ++r) {
    // 0 nothing yet, 1 forwarded, 2 input gradient done, 3 weight gradient done
    std::vector<int> state(static_cast<size_t>(m * v), 0);
    for (const Action& a : s.ranks[r]) {
      if (a.mb < 0 || a.mb >= m || a.chunk < 0 || a.chunk >= v)
        reject(name_of(a, r) + ": micro-batch or chunk out of range");
      int& st = state[static_cast<size_t>(a.mb * v + a.chunk)];
      const int want = a.kind == ActionKind::kForward ? 0
                       : a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput
                           ? 1
                           : 2;
      if (st != want) {
        static const char* what[] = {"before its forward", "after its forward",
                                     "after its input gradient", "after its weight gradient"};
        reject(name_of(a, r) + ": runs " + what[st] +
               " (each micro-batch needs F, then B, then W)");
      }
      st = a.kind == ActionKind::kBackward ? 3 : want + 1;
    }
    for (int i = 0; i < m * v; ++i) {
      if (state[static_cast<size_t>(i)] != 3)
        reject("rank " + std::to_string(r) + " mb " + std::to_string(i / v) + " chunk " +
               std::to_string(i % v) + ": never finishes (forward, input and weight gradient)");
    }
  }
  // Every send matches exactly one receive.
  std::multiset<std::tuple<int, int, uint32_t>> sends, recvs;
  for (int r = 0; r < p; ++r) {
    for (const Action& a : s.ranks[r]) {
      if (a.send_to >= 0) sends.insert({r, a.send_to, a.send_tag});
      if (a.recv_from >= 0) recvs.insert({a.recv_from, r, a.recv_tag});
    }
  }
  for (const auto& [from, to, tag] : sends) {
    if (sends.count({from, to, tag}) != 1 || recvs.count({from, to, tag}) != 1)
      reject("send from rank " + std::to_string(from) + " to " + std::to_string(to) + " tag " +
             std::to_string(tag) + " has no single matching receive");
  }
  if (sends.size() != recvs.size()) reject("a receive has no matching send");
}

double cost_of(const Action& a, const ActionCosts& c) {
  switch (a.kind) {
    case ActionKind::kForward:
      return c.forward;
    case ActionKind::kBackward:
      return c.backward_input + c.backward_weight;
    case ActionKind::kBackwardInput:
      return c.backward_input;
    case ActionKind::kBackwardWeight:
      return c.backward_weight;
  }
  return 0.0;
}

}  // namespace

double SimulationResult::max_bubble() const {
  return bubble.empty() ? 0.0 : *std::max_element(bubble.begin(), bubble.end());
}

double SimulationResult::mean_bubble() const {
  return bubble.empty() ? 0.0
                        : std::accumulate(bubble.begin(), bubble.end(), 0.0) /
                              static_cast<double>(bubble.size());
}

SimulationResult simulate(const Schedule& s, const SimulationOptions& options) {
  check_structure(s);
  const int p = s.shape.ranks;
  SimulationResult res;
  res.busy.assign(p, 0.0);
  res.peak_in_flight.assign(p, 0);
  res.start.resize(p);
  res.end.resize(p);
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0.0);
  std::vector<int> in_flight(p, 0);
  std::map<std::tuple<int, int, uint32_t>, double> sent;  // (from, to, tag) -> end of send
  size_t remaining = 0;
  for (int r = 0; r < p; ++r) {
    remaining += s.ranks[r].size();
    res.start[r].resize(s.ranks[r].size());
    res.end[r].resize(s.ranks[r].size());
  }
  while (remaining > 0) {
    bool progress = false;
    for (int r = 0; r < p; ++r) {
      while (next[r] < s.ranks[r].size()) {
        const Action& a = s.ranks[r][next[r]];
        double ready = free_at[r];
        if (a.recv_from >= 0) {
          auto it = sent.find({a.recv_from, r, a.recv_tag});
          if (it == sent.end()) break;
          ready = std::max(ready, it->second + options.comm_latency);
        }
        const double cost = cost_of(a, options.costs);
        res.start[r][next[r]] = ready;
        res.end[r][next[r]] = ready + cost;
        free_at[r] = ready + cost;
        res.busy[r] += cost;
        if (a.send_to >= 0) sent[{r, a.send_to, a.send_tag}] = ready + cost;
        if (a.kind == ActionKind::kForward) {
          res.peak_in_flight[r] = std::max(res.peak_in_flight[r], ++in_flight[r]);
        } else if (a.kind != ActionKind::kBackwardInput) {
          --in_flight[r];
        }
        ++next[r];
        --remaining;
        progress = true;
      }
    }
    if (!progress) {
      std::string blocked;
      for (int r = 0; r < p; ++r) {
        if (next[r] >= s.ranks[r].size()) continue;
        const Action& a = s.ranks[r][next[r]];
        blocked += "; " + name_of(a, r) + " waits for rank " + std::to_string(a.recv_from) +
                   " tag " + std::to_string(a.recv_tag);
      }
      reject("deadlock" + blocked);
    }
  }
  for (int r = 0; r < p; ++r) res.makespan = std::max(res.makespan, free_at[r]);
  res.bubble.resize(p);
  for (int r = 0; r < p; ++r)
    res.bubble[r] = res.makespan > 0 ? 1.0 - res.busy[r] / res.makespan : 0.0;
  return res;
}

std::string render_timeline(const Schedule& s, const SimulationResult& res) {
  const int width = static_cast<int>(std::ceil(res.makespan));
  std::ostringstream out;
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    std::string line(static_cast<size_t>(width), '.');
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const char c = action_kind_name(s.ranks[r][i].kind)[0] == 'B' &&
                             s.ranks[r][i].kind == ActionKind::kBackward
                         ? 'b'
                         : action_kind_name(s.ranks[r][i].kind)[0];
      for (int t = static_cast<int>(res.start[r][i]); t < static_cast<int>(res.end[r][i]); ++t) {
        if (t >= 0 && t < width) line[static_cast<size_t>(t)] = c;
      }
    }
    out << "rank " << r << " " << line << '\n';
  }
  return out.str();
}

}  // namespace brigade
