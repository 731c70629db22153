#pragma once
// Heartbeats from a worker to the `brigade launch` agent that started it, so that the agent can
// tell a stopped or frozen worker (SIGSTOP, a machine swapping itself to death, a process stuck
// in the kernel) from a slow one.
//
// Channel: a Unix socket pair, used as a one-way pipe. The agent creates one per worker and
// leaves the worker's end open across exec at the number given in BRIGADE_HEARTBEAT_FD;
// BRIGADE_HEARTBEAT_INTERVAL_MS says how often to beat. It needs no file system, no port and no
// cleanup, works the same on every node (each agent watches only its own workers), a worker
// cannot beat for another, and unlike a pipe, send(MSG_NOSIGNAL) to an agent that is gone fails
// with EPIPE instead of killing the worker with SIGPIPE. The worker's
// background thread writes one byte per interval: kHeartbeatBeat ('.'), or kHeartbeatEnd ('E')
// once when it stops beating on purpose (the process is about to exit), after which the agent
// no longer expects beats. Writes never block: a full socket (an agent that is not reading) just
// drops the beat.
//
// What it does not find: a worker whose main thread is stuck while the process runs (a deadlock,
// a collective waiting for a peer). Collectives have their own timeout (comm.timeout_s) for that.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace brigade {

inline constexpr const char* kHeartbeatFdEnv = "BRIGADE_HEARTBEAT_FD";
inline constexpr const char* kHeartbeatIntervalEnv = "BRIGADE_HEARTBEAT_INTERVAL_MS";
inline constexpr char kHeartbeatBeat = '.';
inline constexpr char kHeartbeatEnd = 'E';

// Beats on `fd` every `interval` from a background thread until destroyed. The first beat is
// sent at once. Does not own `fd` (it stays open: descendants may share it).
class HeartbeatSender {
 public:
  HeartbeatSender(int fd, std::chrono::milliseconds interval);
  ~HeartbeatSender();  // sends kHeartbeatEnd and joins the thread (at most one write)
  HeartbeatSender(const HeartbeatSender&) = delete;
  HeartbeatSender& operator=(const HeartbeatSender&) = delete;

  int fd() const { return fd_; }
  std::chrono::milliseconds interval() const { return interval_; }

 private:
  void loop();

  int fd_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// The sender the agent asked for through the environment, or null when BRIGADE_HEARTBEAT_FD is
// unset (not started by an agent that watches heartbeats). Throws ConfigError naming the
// variable when a value is malformed or the fd is not an open socket.
std::unique_ptr<HeartbeatSender> start_heartbeat_from_env();

// The agent's view of one worker's heartbeats: fed with what its socket delivered, it says when
// the worker is overdue. The watch starts with the first beat, so a worker that never beats
// (a program that is not brigade, an old binary) is never declared hung.
class HeartbeatWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // Bytes read from the worker's socket at `now`.
  void on_bytes(const char* data, size_t n, Clock::time_point now);

  // True when the worker has beaten at least once, has not said kHeartbeatEnd, and its last
  // beat is more than `timeout` before `now`.
  bool overdue(Clock::time_point now, std::chrono::milliseconds timeout) const;

  bool armed() const { return armed_ && !ended_; }
  Clock::time_point last_beat() const { return last_; }

 private:
  bool armed_ = false;
  bool ended_ = false;
  Clock::time_point last_{};
};

// The beat interval for an agent timeout: a quarter of it (so three beats may be lost or late
// before the worker is declared hung), at most 1 s, at least 10 ms.
std::chrono::milliseconds heartbeat_interval_for(std::chrono::milliseconds timeout);

}  // namespace brigade
