#include "brigade/runtime/line_relay.h"

namespace brigade {

LineRelay::LineRelay(int rank, std::function<void(std::string_view)> sink)
    : prefix_("[rank " + std::to_string(rank) + "] "), sink_(std::move(sink)) {}

void LineRelay::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    size_t take = nl == std::string_view::npos ? bytes.size() : nl;
    size_t room = kMaxLine - pending_.size();
    if (take > room) {
      // The line passes the cap: relay its first kMaxLine bytes as a line of their own.
      pending_.append(bytes.substr(0, room));
      bytes.remove_prefix(room);
      emit(pending_);
      pending_.clear();
      continue;
    }
    if (nl == std::string_view::npos) {
      pending_.append(bytes);
      return;
    }
    if (pending_.empty()) {
      emit(bytes.substr(0, nl));
    } else {
      pending_.append(bytes.substr(0, nl));
      emit(pending_);
      pending_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
}

void LineRelay::flush() {
  if (pending_.empty()) return;
  emit(pending_);
  pending_.clear();
}

void LineRelay::emit(std::string_view line) {
  out_.clear();
  if (line.substr(0, 6) != "[rank ") out_ = prefix_;
  out_.append(line);
  out_.push_back('\n');
  sink_(out_);
}

}  // namespace brigade
