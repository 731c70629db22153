#include "brigade/monitor/comm_by_axis.h"

#include <utility>

namespace brigade {

CommByAxis::CommByAxis(std::vector<CommChannel> channels)
    : channels_(std::move(channels)),
      marked_(channels_.size() * kNumOpKinds),
      now_(channels_.size() * kNumOpKinds) {}

void CommByAxis::snapshot(std::vector<OpCounters>& out) const {
  for (size_t c = 0; c < channels_.size(); ++c) {
    for (int k = 0; k < kNumOpKinds; ++k) {
      out[c * kNumOpKinds + static_cast<size_t>(k)] = channels_[c].stats->get(OpKind(k));
    }
  }
}

void CommByAxis::mark() {
  snapshot(marked_);
}

void CommByAxis::add_since_mark(nlohmann::json& rec) const {
  add_difference(marked_, rec);
}

void CommByAxis::add_totals(nlohmann::json& rec) const {
  add_difference(std::vector<OpCounters>(marked_.size()), rec);
}

void CommByAxis::add_difference(const std::vector<OpCounters>& before, nlohmann::json& rec) const {
  if (channels_.empty()) return;
  snapshot(now_);
  OpCounters sum;
  nlohmann::json sent = nlohmann::json::object(), received = nlohmann::json::object();
  for (size_t c = 0; c < channels_.size(); ++c) {
    for (int k = 0; k < kNumOpKinds; ++k) {
      const size_t i = c * kNumOpKinds + static_cast<size_t>(k);
      OpCounters d = now_[i];
      d -= before[i];
      sum += d;
      if (d.bytes_sent == 0 && d.bytes_received == 0) continue;
      // Two channels of one name (a group and its sub-uses) add up under that name.
      const std::string key = channels_[c].axis + "/" + op_kind_name(OpKind(k));
      sent[key] = sent.value(key, int64_t{0}) + d.bytes_sent;
      received[key] = received.value(key, int64_t{0}) + d.bytes_received;
    }
  }
  rec["comm_sent_bytes"] = sum.bytes_sent;
  rec["comm_recv_bytes"] = sum.bytes_received;
  rec["comm_rounds"] = sum.rounds;
  rec["comm_sent_by"] = std::move(sent);
  rec["comm_recv_by"] = std::move(received);
}

}  // namespace brigade
