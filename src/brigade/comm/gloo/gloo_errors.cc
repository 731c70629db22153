// Error translation for the Gloo backend. Gloo reports failures as gloo::IoException (socket
// closed, read error, "Timed out waiting ... for recv operation") or gloo::EnforceNotMet
// (invariant checks). We turn them into one CommError whose kind tells a timeout from a lost
// peer and whose message says which operation on which group failed, and, when a peer process
// on this host is gone, which rank it was.
#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "brigade/comm/gloo/gloo_shared.h"

namespace brigade::detail {

namespace {

bool contains_ci(const std::string& haystack, const char* needle) {
  std::string h, n(needle);
  for (char c : haystack) h += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return h.find(n) != std::string::npos;
}

// A process is gone when /proc has no entry for it or it is a zombie awaiting its parent.
bool process_gone(int64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  size_t close = line.rfind(')');  // the command name may contain spaces and parentheses
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  char state = line[close + 2];
  return state == 'Z' || state == 'X';
}

std::string describe_peers(const std::vector<int>& peers) {
  if (peers.empty()) return "all ranks of the group";
  std::string s = peers.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < peers.size(); ++i) s += (i ? ", " : "") + std::to_string(peers[i]);
  return s;
}

}  // namespace

void GlooShared::mark_broken(const CommError& error) {
  std::lock_guard<std::mutex> lock(broken_mu_);
  if (broken_) return;
  broken_ = true;
  broken_kind_ = error.kind();
  broken_message_ = error.what();
}

void GlooShared::throw_if_broken(const OpDesc& op) {
  std::lock_guard<std::mutex> lock(broken_mu_);
  if (!broken_) return;
  throw CommError(broken_kind_, std::string(op_kind_name(op.kind)) + " on group '" + name +
                                    "' not started: the communicator is unusable after an " +
                                    "earlier failure: " + broken_message_);
}

std::vector<int> dead_peers(const GlooShared& s) {
  std::vector<int> dead;
  for (int r = 0; r < static_cast<int>(s.peers.size()); ++r) {
    if (r == s.rank) continue;
    const PeerInfo& p = s.peers[r];
    if (p.pid > 0 && p.host == s.host && process_gone(p.pid)) dead.push_back(r);
  }
  return dead;
}

CommError::Kind classify_error(std::exception_ptr error, std::string* cause) {
  CommError::Kind kind = CommError::Kind::kOther;
  try {
    std::rethrow_exception(error);
  } catch (const CommError& e) {
    kind = e.kind();
    *cause = e.what();
  } catch (const gloo::IoException& e) {
    *cause = e.what();
    kind = contains_ci(*cause, "timed out") || contains_ci(*cause, "timeout")
               ? CommError::Kind::kTimeout
               : CommError::Kind::kPeerLost;
  } catch (const gloo::EnforceNotMet& e) {
    *cause = e.what();
    if (contains_ci(*cause, "timeout")) kind = CommError::Kind::kTimeout;
  } catch (const std::exception& e) {
    *cause = e.what();
  } catch (...) {
    *cause = "unknown exception";
  }
  return kind;
}

CommError make_comm_error(std::exception_ptr error, const GlooShared& s, const OpDesc& op,
                          std::chrono::milliseconds elapsed) {
  std::string cause;
  CommError::Kind kind = classify_error(error, &cause);
  std::vector<int> dead = dead_peers(s);
  if (!dead.empty()) kind = CommError::Kind::kPeerLost;

  std::ostringstream msg;
  msg << op_kind_name(op.kind) << " on group '" << s.name << "' (rank " << s.rank << " of "
      << s.size << ", " << op.bytes << " bytes) ";
  if (kind == CommError::Kind::kTimeout) {
    msg << "timed out after " << elapsed.count() << " ms (timeout " << s.timeout.count()
        << " ms per wait) waiting on " << describe_peers(op.peers);
  } else if (kind == CommError::Kind::kPeerLost) {
    msg << "failed after " << elapsed.count() << " ms: lost a peer (" << describe_peers(op.peers)
        << " involved)";
  } else {
    msg << "failed after " << elapsed.count() << " ms";
  }
  for (int r : dead) {
    const PeerInfo& p = s.peers[r];
    msg << "; rank " << r << " (pid " << p.pid << " on this host) is no longer running";
  }
  msg << " [" << cause << "]";
  return CommError(kind, msg.str());
}

}  // namespace brigade::detail
