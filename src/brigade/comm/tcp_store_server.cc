#include "brigade/comm/tcp_store_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/base/thread_name.h"
#include "brigade/comm/socket_io.h"
#include "brigade/comm/tcp_store_protocol.h"

namespace brigade::detail {

namespace {

constexpr auto kHelloDeadline = std::chrono::seconds(10);
constexpr auto kReplyDeadline = std::chrono::seconds(5);
// Upper bound on a wait request, so a client cannot park a thread forever.
constexpr uint32_t kMaxWaitMs = 24u * 3600u * 1000u;

// Compares without an early exit so the time taken does not reveal how much of a guess matched.
bool same_token(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char ca = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char cb = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(ca ^ cb);
  }
  return diff == 0;
}

bool read_keys(FrameReader& in, std::vector<std::string>* keys) {
  uint32_t n = 0;
  if (!in.u32(&n) || n > kMaxStoreKeysPerRequest) return false;
  keys->resize(n);
  for (auto& k : *keys) {
    if (!in.str(&k, kMaxStoreKeyBytes) || k.empty()) return false;
  }
  return true;
}

}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& bind_host, int port, std::string token)
    : token_(std::move(token)) {
  std::string error;
  listen_fd_ = tcp_listen(bind_host, port, &port_, &error);
  if (listen_fd_ < 0) {
    throw CommError(CommError::Kind::kOther, "tcp store: cannot listen on " + bind_host + ":" +
                                                 std::to_string(port) + ": " + error);
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  stop_ = true;
  data_cv_.notify_all();
  if (acceptor_.joinable()) acceptor_.join();
  std::lock_guard<std::mutex> lock(conns_mu_);
  // Let connection threads finish the reply they are writing (idle ones notice stop_ within
  // 100 ms); only then cut the connections of any that are stuck on a client that stopped
  // reading.
  const auto grace = Clock::now() + std::chrono::seconds(1);
  for (Connection& c : conns_) {
    while (!c.done && Clock::now() < grace)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (Connection& c : conns_) {
    if (!c.done) ::shutdown(c.fd, SHUT_RDWR);
  }
  for (Connection& c : conns_) {
    if (c.thread.joinable()) c.thread.join();
    ::close(c.fd);
  }
  ::close(listen_fd_);
}

void TcpStoreServer::accept_loop() {
  name_this_thread("brigade-store");
  while (!stop_) {
    int fd = tcp_accept(listen_fd_, std::chrono::milliseconds(100));
    std::lock_guard<std::mutex> lock(conns_mu_);
    // Reap connections whose thread has finished.
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (it->done) {
        it->thread.join();
        ::close(it->fd);
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
    if (fd < 0) continue;
    if (static_cast<int>(conns_.size()) >= kMaxStoreConnections) {
      ::close(fd);
      continue;
    }
    Connection& c = conns_.emplace_back();
    c.fd = fd;
    c.thread = std::thread([this, &c] { serve(&c); });
  }
}

bool TcpStoreServer::authenticate(int fd) {
  std::string body;
  if (read_frame(fd, &body, 64 * 1024, Clock::now() + kHelloDeadline, &stop_) != IoStatus::kOk) {
    return false;
  }
  FrameReader in(body);
  uint8_t op = 0;
  uint32_t version = 0;
  std::string magic, token;
  bool well_formed = in.u8(&op) && op == kHello && in.str(&magic, 64) && magic == kStoreMagic &&
                     in.u32(&version) && in.str(&token, 4096) && in.at_end();
  FrameWriter reply;
  bool ok = false;
  if (!well_formed) {
    reply.u8(kBadRequest).str("expected a brigade store hello");
  } else if (version != kStoreProtocolVersion) {
    reply.u8(kRefused).str("protocol version " + std::to_string(version) + " is not " +
                           std::to_string(kStoreProtocolVersion));
  } else if (!token_.empty() && !same_token(token, token_)) {
    reply.u8(kRefused).str("wrong token");
  } else {
    reply.u8(kOk).str("");
    ok = true;
  }
  write_frame(fd, reply.body(), Clock::now() + kReplyDeadline, &stop_);
  return ok;
}

void TcpStoreServer::serve(Connection* conn) {
  if (authenticate(conn->fd)) {
    std::string request, reply;
    for (;;) {
      // Clients may stay idle for the whole job, so there is no read deadline, only stop_.
      IoStatus s =
          read_frame(conn->fd, &request, kMaxStoreFrameBytes, Clock::time_point::max(), &stop_);
      if (s != IoStatus::kOk) break;
      Reply r = handle(request, &reply);
      if (r == Reply::kDrop) break;
      // A reply in progress is delivered even while the server stops (see the destructor).
      if (write_frame(conn->fd, reply, Clock::now() + kReplyDeadline) != IoStatus::kOk ||
          r == Reply::kSendAndClose) {
        break;
      }
    }
  }
  ::shutdown(conn->fd, SHUT_RDWR);
  conn->done = true;
}

TcpStoreServer::Reply TcpStoreServer::handle(const std::string& request, std::string* reply) {
  FrameReader in(request);
  FrameWriter out;
  uint8_t op = 0;
  auto bad = [&] {
    *reply = FrameWriter().u8(kBadRequest).body();
    return Reply::kSendAndClose;
  };
  if (!in.u8(&op)) return bad();
  switch (op) {
    case kSet: {
      std::string key, value;
      if (!in.str(&key, kMaxStoreKeyBytes) || key.empty() || !in.str(&value, kMaxStoreValueBytes) ||
          !in.at_end()) {
        return bad();
      }
      std::lock_guard<std::mutex> lock(data_mu_);
      auto it = data_.find(key);
      int64_t old_size = it == data_.end() ? 0 : static_cast<int64_t>(it->second.size());
      if (data_bytes_ - old_size + static_cast<int64_t>(value.size()) > kMaxStoreTotalBytes) {
        out.u8(kFull);
        break;
      }
      data_bytes_ += static_cast<int64_t>(value.size()) - old_size;
      data_[key] = std::move(value);
      data_cv_.notify_all();
      out.u8(kOk);
      break;
    }
    case kGet: {
      std::string key;
      if (!in.str(&key, kMaxStoreKeyBytes) || !in.at_end()) return bad();
      std::lock_guard<std::mutex> lock(data_mu_);
      auto it = data_.find(key);
      if (it == data_.end()) {
        out.u8(kNotFound);
      } else {
        out.u8(kOk).str(it->second);
      }
      break;
    }
    case kCheck: {
      std::vector<std::string> keys;
      if (!read_keys(in, &keys) || !in.at_end()) return bad();
      std::lock_guard<std::mutex> lock(data_mu_);
      bool all = true;
      for (const auto& k : keys) all = all && data_.count(k) > 0;
      out.u8(kOk).u8(all ? 1 : 0);
      break;
    }
    case kWait: {
      uint32_t timeout_ms = 0;
      std::vector<std::string> keys;
      if (!in.u32(&timeout_ms) || timeout_ms > kMaxWaitMs || !read_keys(in, &keys) ||
          !in.at_end()) {
        return bad();
      }
      const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
      std::unique_lock<std::mutex> lock(data_mu_);
      auto present = [&] {
        for (const auto& k : keys) {
          if (data_.count(k) == 0) return false;
        }
        return true;
      };
      while (!present() && !stop_ && Clock::now() < deadline) {
        data_cv_.wait_for(lock, std::chrono::milliseconds(100));
      }
      // Shutting down: close without a reply, so the client reports the lost host rather than
      // a timeout.
      if (!present() && stop_) return Reply::kDrop;
      out.u8(present() ? kOk : kTimedOut);
      break;
    }
    case kAdd: {
      std::string key;
      int64_t delta = 0;
      if (!in.str(&key, kMaxStoreKeyBytes) || key.empty() || !in.i64(&delta) || !in.at_end()) {
        return bad();
      }
      std::lock_guard<std::mutex> lock(data_mu_);
      int64_t value = 0;
      auto it = data_.find(key);
      if (it != data_.end() && !parse_int64(it->second, &value)) {
        out.u8(kBadRequest);
        break;
      }
      value += delta;
      std::string text = std::to_string(value);
      data_bytes_ += static_cast<int64_t>(text.size()) -
                     (it == data_.end() ? 0 : static_cast<int64_t>(it->second.size()));
      data_[key] = text;
      data_cv_.notify_all();
      out.u8(kOk).i64(value);
      break;
    }
    default:
      return bad();
  }
  *reply = out.body();
  return Reply::kSend;
}

}  // namespace brigade::detail
