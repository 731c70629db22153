#pragma once
// Runs a schedule's action lists on paper: every rank executes its list in order, an action
// starts once the rank is free and the message it receives has been sent (sends never block,
// as in the executor, which posts them asynchronously), and takes its cost. The simulator
// proves a schedule well formed and deadlock-free, and times it without a model.
//
// Well formed: on every rank, every (micro-batch, chunk) is forwarded once, then its input
// gradient computed once, then its weight gradient once (fused or split, not both); every send
// has exactly one matching receive on its peer and vice versa.
#include <string>
#include <vector>

#include "brigade/parallel/pipeline/schedule.h"

namespace brigade {

struct SimulationOptions {
  ActionCosts costs;          // per chunk and micro-batch; a fused Backward costs B + W
  double comm_latency = 0.0;  // from the end of a send to the earliest start of its receiver
};

struct SimulationResult {
  double makespan = 0.0;            // end of the last action on any rank (start is 0)
  std::vector<double> busy;         // per rank: summed action costs
  std::vector<double> bubble;       // per rank: 1 - busy / makespan
  std::vector<int> peak_in_flight;  // per rank: most (micro-batch, chunk) pairs forwarded
                                    // whose weight gradient was not yet computed
  std::vector<std::vector<double>> start, end;  // per rank, per action

  double max_bubble() const;
  double mean_bubble() const;
};

// Throws ConfigError naming the rank, the action and the reason when the schedule is not well
// formed or deadlocks (then every blocked action and what it waits for is listed).
SimulationResult simulate(const Schedule& schedule, const SimulationOptions& options = {});

// A small text Gantt chart, one line per rank, one column per time unit (unit costs).
std::string render_timeline(const Schedule& schedule, const SimulationResult& result);

}  // namespace brigade
