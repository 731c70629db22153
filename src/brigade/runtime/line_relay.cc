#include "brigade/runtime/line_relay.h"

namespace brigade {

LineRelay::LineRelay(int rank, std::function<void(std::string_view)> sink,
                     std::function<void(std::string_view)> live, bool prefix)
    : prefix_(prefix ? "[rank " + std::to_string(rank) + "] " : ""),
      sink_(std::move(sink)),
      live_(std::move(live)) {}

void LineRelay::redraw() {
  const size_t cr = pending_.rfind('\r');
  if (cr != std::string::npos) {
    pending_.erase(0, cr + 1);
    in_live_line_ = true;
  }
  if (!in_live_line_) return;
  // The erase sequence may arrive split over two reads: remove whole ones, and wait for the
  // rest of a partial one before drawing.
  for (size_t at; (at = pending_.find("\033[K")) != std::string::npos;) pending_.erase(at, 3);
  if (pending_.ends_with("\033") || pending_.ends_with("\033[")) return;
  if (live_) {
    out_ = prefix_ + pending_;
    live_(out_);
  }
}

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
      redraw();
      return;
    }
    pending_.append(bytes.substr(0, nl));
    redraw();
    emit(pending_);
    pending_.clear();
    in_live_line_ = false;
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
