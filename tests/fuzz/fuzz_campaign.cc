// Parent/child protocol over a pipe, one record per event, written by the child:
//   'P' i          case i starts           (the parent's hang timer restarts)
//   'O' i code s   case i ended: code -1 accepted, -2 accepted but changed, -3 defect, else the
//                  exit code of the brigade::Error; s its seconds
//   'D' i text     case i is a defect (a foreign exception, a logic_error from run_case)
//   'K' -1 text    after setup, once per Target::known_defects() entry
// A child that dies, or stays silent longer than the hang limit inside a case, is the defect of
// the case it last started; the parent then starts a new child at the next case.
#include "fuzz/fuzz_campaign.h"

#include <cxxabi.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <typeinfo>

#include "fuzz/fuzz_mutator.h"
#include "fuzz/fuzz_target.h"

namespace brigade::fuzz {

namespace {

using Clock = std::chrono::steady_clock;

struct Record {
  char kind = 0;
  int64_t index = 0;
  int32_t code = 0;
  double seconds = 0;
  std::string text;
};

void write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) ::_exit(3);  // the parent is gone
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void send(int fd, const Record& r) {
  std::string buf(1, r.kind);
  buf.append(reinterpret_cast<const char*>(&r.index), 8);
  if (r.kind == 'O') {
    buf.append(reinterpret_cast<const char*>(&r.code), 4);
    buf.append(reinterpret_cast<const char*>(&r.seconds), 8);
  } else if (r.kind == 'D' || r.kind == 'K') {
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(r.text.size(), 2000));
    buf.append(reinterpret_cast<const char*>(&n), 4);
    buf.append(r.text.data(), n);
  }
  write_all(fd, buf.data(), buf.size());
}

std::string type_name(const std::exception& e) {
  int status = 0;
  char* name = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name ? name : typeid(e).name();
  std::free(name);
  return out;
}

std::string scratch_of(const CampaignOptions& o, const std::string& what) {
  const std::string dir = o.dir + "/" + what;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The child: runs cases [first, cases) and reports each; never returns.
[[noreturn]] void child_main(const std::string& name, const CampaignOptions& o, int64_t first,
                             int fd) {
  std::unique_ptr<Target> target;
  std::vector<std::string> seeds;
  try {
    target = make_target(name, scratch_of(o, "run"));
    seeds = target->seeds();
  } catch (const std::exception& e) {
    send(fd, {'D', -1, 0, 0, "setup failed: " + type_name(e) + ": " + e.what()});
    ::_exit(2);
  }
  for (const std::string& k : target->known_defects()) send(fd, {'K', -1, 0, 0, k});
  for (int64_t i = first; i < o.cases; ++i) {
    const std::string input = mutate(seeds, case_seed(o.seed, name, static_cast<uint64_t>(i)));
    send(fd, {'P', i, 0, 0, ""});
    const auto t0 = Clock::now();
    int32_t code = -3;
    std::string defect;
    try {
      const Outcome out = run_case(*target, input);
      code = out.accepted ? (out.changed ? -2 : -1) : out.exit_code;
    } catch (const std::exception& e) {
      defect = type_name(e) + ": " + e.what();
    } catch (...) {
      defect = "an exception that is not a std::exception";
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    send(fd, {'O', i, code, s, ""});
    if (!defect.empty()) send(fd, {'D', i, 0, 0, defect});
  }
  ::_exit(0);  // no destructors: a store server may still hold parked connections
}

// Reads one record, waiting at most timeout; false on EOF, timeout (*timed_out) or error.
bool read_exact(int fd, void* p, size_t n, Clock::time_point deadline, bool* timed_out) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd pfd{fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left, 0)));
    if (r == 0) {
      *timed_out = true;
      return false;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    const ssize_t got = ::read(fd, c, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    c += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool read_record(int fd, Record* r, Clock::time_point deadline, bool* timed_out) {
  if (!read_exact(fd, &r->kind, 1, deadline, timed_out)) return false;
  if (!read_exact(fd, &r->index, 8, deadline, timed_out)) return false;
  if (r->kind == 'O') {
    return read_exact(fd, &r->code, 4, deadline, timed_out) &&
           read_exact(fd, &r->seconds, 8, deadline, timed_out);
  }
  if (r->kind == 'D' || r->kind == 'K') {
    uint32_t n = 0;
    if (!read_exact(fd, &n, 4, deadline, timed_out)) return false;
    r->text.assign(n, '\0');
    return read_exact(fd, r->text.data(), n, deadline, timed_out);
  }
  return true;
}

const char* exit_code_name(int code) {
  switch (code) {
    case 2:
      return "ConfigError";
    case 3:
      return "IoError";
    case 4:
      return "CheckpointError";
    case 5:
      return "CommError";
    default:
      return "Error";
  }
}

}  // namespace

std::string CampaignResult::summary() const {
  std::string rej;
  for (const auto& [code, n] : rejected) {
    rej += fmt::format("{}{} {}", rej.empty() ? "" : ", ", n, exit_code_name(code));
  }
  const std::string changed_text =
      changed > 0 ? fmt::format("{} with changed data, first #{}", changed, first_changed)
                  : "0 with changed data";
  return fmt::format(
      "{} cases in {:.2f} s: {} accepted ({}); rejected: {}; "
      "slowest case {:.1f} ms (#{}); {} defect(s), {} known",
      cases, seconds, accepted, changed_text, rej.empty() ? "none" : rej, slowest_s * 1e3,
      slowest_case, defects.size(), known.size());
}

void write_case_input(const std::string& name, const CampaignOptions& o, int64_t index,
                      const std::string& path) {
  // In a child: building a target may start threads (a store server, a communicator).
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      auto target = make_target(name, scratch_of(o, "repro"));
      const auto seeds = target->seeds();
      write_scratch(path, mutate(seeds, case_seed(o.seed, name, static_cast<uint64_t>(index))));
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  int status = 0;
  if (pid > 0) ::waitpid(pid, &status, 0);
}

CampaignResult run_campaign(const std::string& name, const CampaignOptions& o) {
  CampaignResult result;
  std::filesystem::create_directories(o.dir);
  int64_t next = 0;
  std::vector<std::string> known_patterns;
  auto add_defect = [&](int64_t index, const std::string& what) {
    std::string line = fmt::format("case #{}: {}", index, what);
    for (const std::string& k : known_patterns) {
      if (what.find(k) != std::string::npos) {
        result.known.push_back(line);
        return;
      }
    }
    // Inputs are saved for the first few (each costs a child that rebuilds the seeds).
    if (index >= 0 && static_cast<int>(result.defects.size()) < o.max_defects) {
      const std::string input = fmt::format("{}/defect-{}-{}.bin", o.dir, name, index);
      write_case_input(name, o, index, input);
      line += fmt::format(" (input: {}; seed {})", input, o.seed);
    }
    result.defects.push_back(line);
  };
  while (next < o.cases && static_cast<int>(result.defects.size()) < o.max_defects) {
    int fds[2];
    if (::pipe(fds) != 0) {
      result.defects.push_back("cannot create a pipe");
      break;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      child_main(name, o, next, fds[1]);
    }
    ::close(fds[1]);
    int64_t current = -1;  // the case the child is running
    bool timed_out = false;
    // Setting up (a checkpoint to save, a server to start) may take longer than a case.
    auto deadline = Clock::now() + std::chrono::seconds(60);
    Record r;
    while (read_record(fds[0], &r, deadline, &timed_out)) {
      if (r.kind == 'P') {
        current = r.index;
        deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(o.hang_limit_s));
      } else if (r.kind == 'O') {
        ++result.cases;
        result.seconds += r.seconds;
        if (r.seconds > result.slowest_s) {
          result.slowest_s = r.seconds;
          result.slowest_case = r.index;
        }
        if (r.code == -1 || r.code == -2) ++result.accepted;
        if (r.code == -2 && result.changed++ == 0) {
          result.first_changed = r.index;
          write_case_input(name, o, r.index,
                           fmt::format("{}/changed-{}-{}.bin", o.dir, name, r.index));
        }
        if (r.code >= 0) ++result.rejected[r.code];
        if (r.seconds > o.case_limit_s) {
          add_defect(r.index, fmt::format("took {:.2f} s (limit {} s)", r.seconds, o.case_limit_s));
        }
        current = -1;
        next = r.index + 1;
        deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(o.hang_limit_s));
      } else if (r.kind == 'K') {
        if (std::find(known_patterns.begin(), known_patterns.end(), r.text) ==
            known_patterns.end()) {
          known_patterns.push_back(r.text);
        }
      } else if (r.kind == 'D') {
        add_defect(r.index, r.text);
        if (r.index < 0) next = o.cases;  // setup failed: nothing to resume
      }
    }
    if (timed_out) ::kill(pid, SIGKILL);
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (current >= 0) {
      std::string what = timed_out ? fmt::format("hung (killed after {} s)", o.hang_limit_s)
                         : WIFSIGNALED(status)
                             ? fmt::format("crashed: {}", strsignal(WTERMSIG(status)))
                             : fmt::format(
                                   "crashed: the process exited with {} (a sanitizer "
                                   "report, if any, is on stderr)",
                                   WEXITSTATUS(status));
      ++result.cases;
      add_defect(current, what);
      next = current + 1;
    } else if (timed_out) {
      result.defects.push_back("setup hung");
      break;
    } else if (next < o.cases && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      result.defects.push_back(fmt::format("the campaign process stopped before case #{}", next));
      break;
    }
  }
  return result;
}

}  // namespace brigade::fuzz
