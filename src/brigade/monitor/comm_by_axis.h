#pragma once
// Communication per step, by mesh axis and operation: which collective on which group moved the
// bytes. Every communicator a rank uses is a CHANNEL named after its group ("dp", "tp", "pp",
// "ep", "world", ...); its CommStats counts per operation kind (comm_stats.h). A step's figures
// are the counters' difference between two snapshots, so nothing on the communicators' hot path
// changes.
//
// The metrics record gets the totals (comm_sent_bytes, comm_recv_bytes, comm_rounds) and
// `comm_sent_by` / `comm_recv_by`: {"<axis>/<op>": bytes} for every pair that moved bytes this
// step, e.g. {"dp/all_reduce": 185004, "world/all_gather": 8}.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/comm/comm_stats.h"

namespace brigade {

struct CommChannel {
  std::string axis;        // the group's name in metrics: "dp", "tp", "pp", "ep", "world", ...
  const CommStats* stats;  // not owned; outlives the CommByAxis
};

class CommByAxis {
 public:
  CommByAxis() = default;
  explicit CommByAxis(std::vector<CommChannel> channels);

  // Remembers the counters: the start of a step.
  void mark();
  // Adds the totals and the by-axis-and-op figures since mark() to a metrics record.
  void add_since_mark(nlohmann::json& rec) const;
  // The same, over the whole run so far (for the summary).
  void add_totals(nlohmann::json& rec) const;

 private:
  void snapshot(std::vector<OpCounters>& out) const;
  void add_difference(const std::vector<OpCounters>& before, nlohmann::json& rec) const;

  std::vector<CommChannel> channels_;
  std::vector<OpCounters> marked_;  // channels x kNumOpKinds
  mutable std::vector<OpCounters> now_;
};

}  // namespace brigade
