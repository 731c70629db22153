#include "brigade/comm/tcp_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "brigade/base/error.h"
#include "brigade/comm/socket_io.h"
#include "brigade/comm/store_handshake.h"
#include "brigade/comm/tcp_store_protocol.h"
#include "brigade/comm/tcp_store_server.h"

namespace brigade {

using detail::Clock;
using detail::FrameReader;
using detail::FrameWriter;
using detail::IoStatus;

namespace {

// "5 s", "2.5 s", "300 ms".
std::string format_duration(std::chrono::milliseconds d) {
  char buf[32];
  if (d.count() < 1000) {
    std::snprintf(buf, sizeof(buf), "%lld ms", static_cast<long long>(d.count()));
  } else if (d.count() % 1000 == 0) {
    std::snprintf(buf, sizeof(buf), "%lld s", static_cast<long long>(d.count() / 1000));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f s", d.count() / 1000.0);
  }
  return buf;
}

// A reply to a request that waits server-side may take the wait itself plus this margin.
constexpr auto kReplyMargin = std::chrono::seconds(10);

}  // namespace

std::string store_token_from_env() {
  const char* t = std::getenv("BRIGADE_STORE_TOKEN");
  return t ? std::string(t) : std::string();
}

TcpStore::TcpStore(TcpStoreOptions options)
    : Store(options.timeout), options_(std::move(options)), port_(options_.port) {
  if (options_.port < 0 || options_.port > 65535 || (!options_.is_server && options_.port == 0)) {
    throw ConfigError("tcp store: port must be 1..65535 (0 only on the server), got " +
                      std::to_string(options_.port));
  }
  if (options_.timeout.count() <= 0) {
    throw ConfigError("tcp store: timeout must be positive, got " +
                      std::to_string(options_.timeout.count()) + " ms");
  }
  if (options_.token.size() > detail::kMaxStoreTokenBytes) {
    // Neither the token nor its length is ever part of a message.
    throw ConfigError("tcp store: the store token (BRIGADE_STORE_TOKEN) has " +
                      std::to_string(options_.token.size()) + " bytes; at most " +
                      std::to_string(detail::kMaxStoreTokenBytes) + " are allowed");
  }
  if (options_.is_server) {
    const std::string bind = options_.bind_host.empty() ? options_.host : options_.bind_host;
    server_ = std::make_unique<detail::TcpStoreServer>(bind, options_.port, options_.token);
    port_ = server_->port();
    if (options_.token.empty()) {
      // Said once, by the server: a worker started by hand keeps working without a token, but
      // whoever runs it should know that the rendezvous is open to anyone who reaches the port.
      std::fprintf(
          stderr,
          "%swarning: %s is unauthenticated (BRIGADE_STORE_TOKEN is not set): any "
          "process that can reach the port may join the rendezvous; brigade launch "
          "sets a token for its workers\n",
          options_.rank >= 0 ? ("[rank " + std::to_string(options_.rank) + "] ").c_str() : "",
          describe().c_str());
    }
  }
  connect_and_hello();
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
  server_.reset();
}

std::string TcpStore::where() const {
  return options_.rank >= 0 ? "rank " + std::to_string(options_.rank) + ": " : std::string();
}

std::string TcpStore::describe() const {
  return "tcp store " + options_.host + ":" + std::to_string(port_);
}

void TcpStore::connect_once(Clock::time_point deadline) {
  std::string last_error = "no attempt";
  auto backoff = std::chrono::milliseconds(10);
  while (fd_ < 0) {
    auto attempt_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(2));
    fd_ = detail::tcp_connect_once(options_.host, port_, attempt_deadline, &last_error);
    if (fd_ >= 0) break;
    const auto now = Clock::now();
    if (now >= deadline) {
      throw CommError(CommError::Kind::kTimeout,
                      where() + "could not reach store at " + options_.host + ":" +
                          std::to_string(port_) + " within " + format_duration(options_.timeout) +
                          " (last error: " + last_error + ")");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

void TcpStore::connect_and_hello() {
  const auto deadline = Clock::now() + options_.timeout;
  auto backoff = std::chrono::milliseconds(50);
  for (;;) {
    connect_once(deadline);
    // The handshake's own I/O is bounded by the server's hello deadline (plus a margin), so a
    // server that accepts and never answers cannot hold us for the whole timeout at once.
    const auto hello_deadline =
        std::min(deadline, Clock::now() + detail::kStoreHelloTimeout + std::chrono::seconds(1));
    detail::HandshakeFailure failure;
    if (auto channel = detail::client_handshake(fd_, options_.token, hello_deadline, &failure)) {
      channel_ = std::move(*channel);
      return;
    }
    const bool answered = failure.answered;
    const uint8_t status = failure.status;
    const std::string& message = failure.message;
    const IoStatus s = failure.io;
    if (failure.impostor) {
      ::close(fd_);
      fd_ = -1;
      throw CommError(CommError::Kind::kOther,
                      where() + describe() + ": " + message +
                          " (not this job's store, or a different BRIGADE_STORE_TOKEN)");
    }
    ::close(fd_);
    fd_ = -1;
    // A busy server (too many connections waiting for their hello, perhaps strangers) or one
    // that closed before answering frees up within its hello deadline: retry until ours.
    const bool retry = !answered || status == detail::kBusy;
    if (!retry) {
      const bool token_problem = message.find("token") != std::string::npos;
      throw CommError(CommError::Kind::kOther,
                      where() + describe() + " refused this client: " + message +
                          (token_problem ? " (set BRIGADE_STORE_TOKEN to the token the job was "
                                           "started with; brigade launch passes it to its "
                                           "workers)"
                                         : ""));
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      const std::string why =
          answered ? message : std::string("hello failed: ") + detail::io_status_text(s);
      throw CommError(s == IoStatus::kTimeout || answered ? CommError::Kind::kTimeout
                                                          : CommError::Kind::kPeerLost,
                      where() + describe() + ": could not join within " +
                          format_duration(options_.timeout) + " (last answer: " + why + ")");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

std::string TcpStore::round_trip(const std::string& request, std::chrono::milliseconds io_limit,
                                 const char* what) {
  const auto deadline = Clock::now() + io_limit;
  IoStatus s = detail::write_frame(fd_, channel_.send.seal(request), deadline);
  std::string frame, reply;
  if (s == IoStatus::kOk) {
    s = detail::read_frame(fd_, &frame, detail::kMaxStoreFrameBytes + detail::kStoreSealBytes,
                           deadline);
  }
  if (s == IoStatus::kOk && !channel_.receive.open(frame, &reply)) {
    throw CommError(CommError::Kind::kOther,
                    where() + describe() + ": " + what +
                        ": the reply failed its integrity check (tampered, replayed or "
                        "corrupted on the way)");
  }
  if (s != IoStatus::kOk) {
    throw CommError(
        s == IoStatus::kTimeout ? CommError::Kind::kTimeout : CommError::Kind::kPeerLost,
        where() + describe() + ": " + what + " failed: " + detail::io_status_text(s) +
            " (is rank 0, which hosts the store, still running?)");
  }
  return reply;
}

void TcpStore::set(const std::string& key, const std::vector<char>& value) {
  if (key.empty() || static_cast<int64_t>(key.size()) > detail::kMaxStoreKeyBytes ||
      static_cast<int64_t>(value.size()) > detail::kMaxStoreValueBytes) {
    throw ConfigError("tcp store: key must have 1.." + std::to_string(detail::kMaxStoreKeyBytes) +
                      " bytes and value at most " + std::to_string(detail::kMaxStoreValueBytes) +
                      " (key '" + key.substr(0, 64) + "', value " + std::to_string(value.size()) +
                      " bytes)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::string reply =
      round_trip(FrameWriter().u8(detail::kSet).str(key).bytes(value.data(), value.size()).body(),
                 timeout(), "set");
  if (reply.empty() || static_cast<uint8_t>(reply[0]) != detail::kOk) {
    throw CommError(CommError::Kind::kOther,
                    where() + describe() + " refused set of '" + key + "' (store full or bad key)");
  }
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key}, timeout());
  std::lock_guard<std::mutex> lock(mu_);
  std::string reply = round_trip(FrameWriter().u8(detail::kGet).str(key).body(), timeout(), "get");
  FrameReader in(reply);
  uint8_t status = 0;
  std::string value;
  if (!in.u8(&status) || status != detail::kOk ||
      !in.str(&value, static_cast<size_t>(detail::kMaxStoreValueBytes))) {
    throw CommError(CommError::Kind::kOther,
                    where() + describe() + ": get of '" + key + "' failed after it was present");
  }
  return std::vector<char>(value.begin(), value.end());
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  FrameWriter req;
  req.u8(detail::kCheck).u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) req.str(k);
  std::lock_guard<std::mutex> lock(mu_);
  std::string reply = round_trip(req.body(), timeout(), "check");
  FrameReader in(reply);
  uint8_t status = 0, present = 0;
  if (!in.u8(&status) || status != detail::kOk || !in.u8(&present)) {
    throw CommError(CommError::Kind::kOther,
                    where() + describe() + " rejected check of " + detail::format_keys(keys));
  }
  return present != 0;
}

void TcpStore::wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) {
  FrameWriter req;
  auto ms = std::clamp<int64_t>(timeout.count(), 0, 24 * 3600 * 1000);
  req.u8(detail::kWait).u32(static_cast<uint32_t>(ms)).u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) req.str(k);
  uint8_t status = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string reply = round_trip(req.body(), timeout + kReplyMargin, "wait");
    FrameReader in(reply);
    if (!in.u8(&status) || (status != detail::kOk && status != detail::kTimedOut)) {
      throw CommError(CommError::Kind::kOther,
                      where() + describe() + " rejected wait for " + detail::format_keys(keys));
    }
  }
  if (status == detail::kTimedOut) {
    std::vector<std::string> missing;
    for (const auto& k : keys) {
      if (!check({k})) missing.push_back(k);
    }
    throw CommError(CommError::Kind::kTimeout,
                    where() + describe() + ": timed out after " + format_duration(timeout) +
                        " waiting for key(s) " + detail::format_keys(missing));
  }
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string reply =
      round_trip(FrameWriter().u8(detail::kAdd).str(key).i64(delta).body(), timeout(), "add");
  FrameReader in(reply);
  uint8_t status = 0;
  int64_t value = 0;
  if (in.u8(&status) && status == detail::kOverflow && in.i64(&value)) {
    throw CommError(CommError::Kind::kOther,
                    where() + describe() + ": " + detail::add_overflow_message(key, value, delta));
  }
  if (status != detail::kOk || !in.i64(&value)) {
    throw CommError(CommError::Kind::kOther,
                    where() + describe() + ": add on '" + key + "' failed (" +
                        (status == detail::kFull ? "store full" : "not a counter key?") + ")");
  }
  return value;
}

}  // namespace brigade
