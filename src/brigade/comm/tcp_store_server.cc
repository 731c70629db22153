#include "brigade/comm/tcp_store_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/base/thread_name.h"
#include "brigade/comm/socket_io.h"
#include "brigade/comm/store_handshake.h"
#include "brigade/comm/tcp_store_protocol.h"

namespace brigade::detail {

namespace {

// A reply is a small frame to a client that just asked for it; it gets this long.
constexpr auto kReplyDeadline = std::chrono::seconds(5);
// Upper bound on a wait request, so a client cannot park a thread forever.
constexpr uint32_t kMaxWaitMs = 24u * 3600u * 1000u;
// A connection's buffers are kept between requests up to this size; larger ones (a big value
// went through) are released, so an idle connection holds little.
constexpr size_t kKeepBufferBytes = 1 << 20;

// Refuses a connection without starting a thread for it: says why (so that a real client knows
// to retry), then closes. Anything the client already sent is drained first, so that closing
// sends FIN rather than RST (an RST could discard the reply before the client reads it). Called
// on the accept thread: nothing here may block.
void refuse_busy(int fd, const std::string& why) {
  char sink[kMaxStoreHelloFrameBytes];
  for (int i = 0; i < 4 && ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
  }
  // A fresh socket's send buffer takes a few dozen bytes at once; if not, the client sees the
  // close and retries all the same.
  const std::string body = FrameWriter().u8(kBusy).str(why).body();
  const std::string frame = FrameWriter().bytes(body.data(), body.size()).body();
  (void)::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

bool read_keys(FrameReader& in, std::vector<std::string>* keys) {
  uint32_t n = 0;
  if (!in.u32(&n) || n > kMaxStoreKeysPerRequest) return false;
  // Keys are added as they parse, not reserved from n: a count is a claim like any length.
  keys->clear();
  for (uint32_t i = 0; i < n; ++i) {
    std::string k;
    if (!in.str(&k, kMaxStoreKeyBytes) || k.empty()) return false;
    keys->push_back(std::move(k));
  }
  return true;
}

}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& bind_host, int port, std::string token)
    : token_(std::move(token)), key_(store_key(token_)) {
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
    // Strangers are bounded apart from the ranks: a flood of them is refused here, at once,
    // and cannot take the slots of connections that authenticated.
    if (pending_ >= kMaxStorePendingConnections) {
      refuse_busy(fd, "too many connections are waiting to authenticate; retry");
      continue;
    }
    ++pending_;
    Connection& c = conns_.emplace_back();
    c.fd = fd;
    c.accepted = Clock::now();
    c.thread = std::thread([this, &c] { serve(&c); });
  }
}

bool TcpStoreServer::authenticate(Connection* conn) {
  // Every handshake frame is small and must come within the deadline, counted from the accept: a
  // stranger announcing more is cut off before anything is allocated, one trickling bytes at
  // the deadline.
  const auto deadline = conn->accepted + kStoreHelloTimeout;
  auto refuse = [&](const HelloVerdict& verdict) {
    --pending_;
    write_frame(conn->fd, FrameWriter().u8(verdict.status).str(verdict.message).body(),
                Clock::now() + kReplyDeadline, &stop_);
    return false;
  };
  std::string body, client_nonce;
  if (read_frame(conn->fd, &body, kMaxStoreHelloFrameBytes, deadline, &stop_) != IoStatus::kOk) {
    --pending_;
    return false;
  }
  const HelloVerdict hello = check_hello(body, &client_nonce);
  if (!hello.accepted) return refuse(hello);
  const std::string server_nonce = store_nonce();
  const bool token_required = !token_.empty();
  if (write_frame(conn->fd, challenge_body(token_required, server_nonce), deadline, &stop_) !=
          IoStatus::kOk ||
      read_frame(conn->fd, &body, kMaxStoreHelloFrameBytes, deadline, &stop_) != IoStatus::kOk) {
    --pending_;
    return false;
  }
  HelloVerdict verdict = check_proof(body, key_, token_required, client_nonce, server_nonce);
  if (verdict.accepted && authenticated_.fetch_add(1) >= kMaxStoreConnections) {
    --authenticated_;
    verdict = {false, kBusy, "too many connections; retry"};
  }
  if (!verdict.accepted) return refuse(verdict);
  --pending_;
  conn->channel = server_channel(key_, client_nonce, server_nonce);
  write_frame(conn->fd, verdict_body(verdict, key_, client_nonce, server_nonce),
              Clock::now() + kReplyDeadline, &stop_);
  return true;
}

void TcpStoreServer::serve(Connection* conn) {
  if (authenticate(conn)) {
    std::string frame, request, reply;
    for (;;) {
      // Clients may stay idle for the whole job, so there is no deadline for the next frame,
      // only stop_; once its length has come, the body must keep coming.
      uint32_t len = 0;
      IoStatus s = read_frame_header(conn->fd, &len, kMaxStoreFrameBytes + kStoreSealBytes,
                                     Clock::time_point::max(), &stop_);
      if (s == IoStatus::kOk) {
        s = read_frame_body(conn->fd, len, &frame, Clock::time_point::max(),
                            kStoreFrameStallTimeout, &stop_);
      }
      if (s != IoStatus::kOk) break;
      if (!conn->channel.receive.open(frame, &request)) {
        // Not sealed by this client as its next frame: tampered, replayed or corrupted.
        std::fprintf(stderr,
                     "tcp store: closed a connection whose frame failed its integrity check "
                     "(tampered, replayed or corrupted on the way)\n");
        break;
      }
      Reply r = handle(request, &reply);
      if (r == Reply::kDrop) break;
      // A reply in progress is delivered even while the server stops (see the destructor).
      if (write_frame(conn->fd, conn->channel.send.seal(reply), Clock::now() + kReplyDeadline) !=
              IoStatus::kOk ||
          r == Reply::kSendAndClose) {
        break;
      }
      for (std::string* b : {&frame, &request, &reply}) {
        if (b->capacity() > kKeepBufferBytes) std::string().swap(*b);
      }
    }
    --authenticated_;
  }
  ::shutdown(conn->fd, SHUT_RDWR);
  conn->done = true;
}

bool TcpStoreServer::put_locked(const std::string& key, std::string value) {
  auto it = data_.find(key);
  const int64_t old_bytes =
      it == data_.end() ? 0 : static_cast<int64_t>(key.size() + it->second.size());
  const int64_t new_bytes = static_cast<int64_t>(key.size() + value.size());
  if (data_bytes_ - old_bytes + new_bytes > kMaxStoreTotalBytes) return false;
  data_bytes_ += new_bytes - old_bytes;
  if (it == data_.end()) {
    data_.emplace(key, std::move(value));
  } else {
    it->second = std::move(value);
  }
  data_cv_.notify_all();
  return true;
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
      out.u8(put_locked(key, std::move(value)) ? kOk : kFull);
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
      // A counter that would leave int64 is refused and stays as it was (signed overflow would
      // be undefined behaviour); the reply carries the current value for the client's message.
      int64_t sum = 0;
      if (__builtin_add_overflow(value, delta, &sum)) {
        out.u8(kOverflow).i64(value);
        break;
      }
      if (!put_locked(key, std::to_string(sum))) {
        out.u8(kFull);
        break;
      }
      out.u8(kOk).i64(sum);
      break;
    }
    default:
      return bad();
  }
  *reply = out.body();
  return Reply::kSend;
}

}  // namespace brigade::detail
