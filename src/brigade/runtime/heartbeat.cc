#include "brigade/runtime/heartbeat.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

#include "brigade/base/error.h"
#include "brigade/base/thread_name.h"

namespace brigade {

namespace {

// A decimal integer in [lo, hi] from environment variable `name`.
int env_int(const char* name, const char* value, int lo, int hi) {
  int v = 0;
  const char* end = value + std::strlen(value);
  auto [ptr, ec] = std::from_chars(value, end, v);
  if (ec != std::errc() || ptr != end || value == end || v < lo || v > hi) {
    throw ConfigError("environment variable " + std::string(name) + "='" + value +
                      "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                      "]");
  }
  return v;
}

// One byte, never blocking, never raising SIGPIPE; a full or closed socket drops it.
void send_byte(int fd, char byte) {
  while (::send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR) {
  }
}

}  // namespace

HeartbeatSender::HeartbeatSender(int fd, std::chrono::milliseconds interval)
    : fd_(fd), interval_(interval) {
  thread_ = std::thread([this] { loop(); });
}

HeartbeatSender::~HeartbeatSender() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  send_byte(fd_, kHeartbeatEnd);
}

void HeartbeatSender::loop() {
  name_this_thread("brigade-beat");
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    send_byte(fd_, kHeartbeatBeat);
    cv_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

std::unique_ptr<HeartbeatSender> start_heartbeat_from_env() {
  const char* fd_text = std::getenv(kHeartbeatFdEnv);
  if (!fd_text || !*fd_text) return nullptr;
  int fd = env_int(kHeartbeatFdEnv, fd_text, 3, 1 << 20);
  const char* interval_text = std::getenv(kHeartbeatIntervalEnv);
  int interval_ms = env_int(kHeartbeatIntervalEnv, interval_text ? interval_text : "", 1, 60000);
  struct stat st {};
  int err = ::fstat(fd, &st) != 0 ? errno : 0;
  if (err != 0 || !S_ISSOCK(st.st_mode)) {
    throw ConfigError("environment variable " + std::string(kHeartbeatFdEnv) + "=" + fd_text +
                      ": not an open socket (" +
                      (err != 0 ? std::strerror(err) : "another kind of file") +
                      "); it is set by brigade launch for its workers only");
  }
  return std::make_unique<HeartbeatSender>(fd, std::chrono::milliseconds(interval_ms));
}

void HeartbeatWatch::on_bytes(const char* data, size_t n, Clock::time_point now) {
  for (size_t i = 0; i < n; ++i) {
    if (data[i] == kHeartbeatEnd) ended_ = true;
    if (data[i] == kHeartbeatBeat) {
      armed_ = true;
      last_ = now;
    }
  }
}

bool HeartbeatWatch::overdue(Clock::time_point now, std::chrono::milliseconds timeout) const {
  return armed() && now - last_ > timeout;
}

std::chrono::milliseconds heartbeat_interval_for(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
}

}  // namespace brigade
