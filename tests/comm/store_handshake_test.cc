// The TCP store's handshake and sealed frames (comm/store_handshake.h) against an attacker on
// the wire: a proxy between a real client and a real server records every byte (the token and
// the stored values never appear in them), flips one byte of a frame, or replays one (each
// closes the connection, and a replayed add is not applied twice); a fake server that does not
// hold the token is refused by the client. Traffic stays on 127.0.0.1.
#include "brigade/comm/store_handshake.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "brigade/base/error.h"
#include "brigade/comm/socket_io.h"
#include "brigade/comm/tcp_store.h"
#include "brigade/comm/tcp_store_protocol.h"
#include "comm/comm_test_util.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testutil::client_options;
using testutil::server_options;

// The handshake's plain bytes on the wire, frame prefixes included: the client's hello
// (4 + 26 + 32) and proof (4 + 1 + 4 + 32), the server's challenge (4 + 1 + 4 + 1 + 4 + 32)
// and verdict (4 + 1 + 4 + 4 + 32). Sealed frames come after them.
constexpr size_t kClientHandshakeBytes = 62 + 41;
constexpr size_t kServerHandshakeBytes = 46 + 45;

int listen_loopback(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
  EXPECT_EQ(::listen(fd, 4), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  *port = ntohs(addr.sin_port);
  return fd;
}

int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// Relays one connection to the store, recording both directions. edit(direction, stream)
// may change the bytes of a direction before they are forwarded: stream is everything that
// direction has sent so far (including the new bytes), and only its unforwarded tail is sent.
class Proxy {
 public:
  enum Direction { kToServer = 0, kToClient = 1 };
  using Edit = std::function<void(Direction, std::string&)>;

  Proxy(int upstream_port, Edit edit) : edit_(std::move(edit)) {
    listen_fd_ = listen_loopback(&port_);
    thread_ = std::thread([this, upstream_port] { relay(upstream_port); });
  }
  ~Proxy() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  std::string seen(Direction d) {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_[d];
  }

 private:
  void relay(int upstream_port) {
    pollfd accept_poll{listen_fd_, POLLIN, 0};
    while (!stop_ && ::poll(&accept_poll, 1, 50) <= 0) {
    }
    if (stop_) return;
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    const int server = connect_loopback(upstream_port);
    int fds[2] = {client, server};  // read from fds[d], forward to fds[1 - d]
    size_t forwarded[2] = {0, 0};
    char buf[65536];
    while (!stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      bool closed = false;
      for (int d = 0; d < 2; ++d) {
        if (!(p[d].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::recv(fds[d], buf, sizeof(buf), 0);
        if (n <= 0) {
          closed = true;
          break;
        }
        std::lock_guard<std::mutex> lock(mu_);
        std::string& stream = seen_[d];
        stream.append(buf, static_cast<size_t>(n));
        edit_(static_cast<Direction>(d), stream);
        const std::string tail = stream.substr(forwarded[d]);
        forwarded[d] = stream.size();
        (void)::send(fds[1 - d], tail.data(), tail.size(), MSG_NOSIGNAL);
      }
      if (closed) break;
    }
    ::shutdown(client, SHUT_RDWR);
    ::shutdown(server, SHUT_RDWR);
    ::close(client);
    ::close(server);
  }

  Edit edit_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::string seen_[2];
};

const std::string kToken = "7f3a9c0e5b21d48e6a0f9b3c2d1e4f56";

TEST(StoreHandshakeTest, SealedFramesOpenOnceInOrder) {
  const detail::StoreKey key = detail::store_key(kToken);
  const std::string cn = detail::store_nonce(), sn = detail::store_nonce();
  detail::SealedDirection sender(key, cn, sn, "client to server");
  detail::SealedDirection receiver(key, cn, sn, "client to server");
  const std::string a = sender.seal("first"), b = sender.seal("second");
  EXPECT_EQ(a.size(), 5 + detail::kStoreSealBytes);
  std::string plain;
  EXPECT_FALSE(receiver.open(b, &plain)) << "the second frame opened first";
  ASSERT_TRUE(receiver.open(a, &plain));
  EXPECT_EQ(plain, "first");
  EXPECT_FALSE(receiver.open(a, &plain)) << "a replay opened";
  std::string flipped = b;
  flipped[3] ^= 1;
  EXPECT_FALSE(receiver.open(flipped, &plain)) << "a flipped byte opened";
  ASSERT_TRUE(receiver.open(b, &plain));
  EXPECT_EQ(plain, "second");
  // The other direction's key does not open this one's frames.
  detail::SealedDirection other(key, cn, sn, "server to client");
  EXPECT_FALSE(
      other.open(detail::SealedDirection(key, cn, sn, "client to server").seal("x"), &plain));
}

TEST(StoreHandshakeTest, NeitherTheTokenNorTheValuesCrossTheWire) {
  TcpStore server(server_options(kToken));
  Proxy proxy(server.port(), [](Proxy::Direction, std::string&) {});
  const std::string value = "a value only the job may read: 0123456789";
  {
    TcpStore client(client_options(proxy.port(), kToken));
    client.set_string("public-key/rank-3", value);
    EXPECT_EQ(client.get_string("public-key/rank-3"), value);
  }
  std::this_thread::sleep_for(100ms);
  const std::string up = proxy.seen(Proxy::kToServer), down = proxy.seen(Proxy::kToClient);
  ASSERT_GT(up.size(), kClientHandshakeBytes);
  ASSERT_GT(down.size(), kServerHandshakeBytes);
  for (const std::string& wire : {up, down}) {
    EXPECT_EQ(wire.find(kToken), std::string::npos);
    EXPECT_EQ(wire.find(kToken.substr(0, 8)), std::string::npos);
    EXPECT_EQ(wire.find("a value only"), std::string::npos);
    EXPECT_EQ(wire.find("public-key/rank-3"), std::string::npos) << "keys are sealed too";
  }
}

TEST(StoreHandshakeTest, AFlippedByteClosesTheConnection) {
  TcpStore server(server_options(kToken));
  for (const Proxy::Direction d : {Proxy::kToServer, Proxy::kToClient}) {
    SCOPED_TRACE(d == Proxy::kToServer ? "request tampered" : "reply tampered");
    const size_t at = (d == Proxy::kToServer ? kClientHandshakeBytes : kServerHandshakeBytes) + 6;
    bool flipped = false;
    Proxy proxy(server.port(), [&](Proxy::Direction dir, std::string& stream) {
      if (dir == d && stream.size() > at && !flipped) {
        stream[at] ^= 0x10;
        flipped = true;
      }
    });
    TcpStore client(client_options(proxy.port(), kToken));
    try {
      client.set_string("k", "v");
      FAIL() << "a tampered frame was accepted";
    } catch (const CommError& e) {
      if (d == Proxy::kToClient) EXPECT_THAT(e.what(), HasSubstr("integrity check"));
    }
    EXPECT_TRUE(flipped);
  }
}

TEST(StoreHandshakeTest, AReplayedRequestIsNotAppliedTwice) {
  TcpStore server(server_options(kToken));
  bool replayed = false;
  Proxy proxy(server.port(), [&](Proxy::Direction dir, std::string& stream) {
    if (dir != Proxy::kToServer || replayed || stream.size() < kClientHandshakeBytes + 4) return;
    const unsigned char* p =
        reinterpret_cast<const unsigned char*>(stream.data()) + kClientHandshakeBytes;
    const size_t frame = 4 + (p[0] | (p[1] << 8) | (p[2] << 16) | (size_t{p[3]} << 24));
    if (stream.size() < kClientHandshakeBytes + frame) return;
    stream += stream.substr(kClientHandshakeBytes, frame);  // the first request, again
    replayed = true;
  });
  {
    TcpStore client(client_options(proxy.port(), kToken));
    EXPECT_EQ(client.add("counter", 1), 1);
    EXPECT_THROW(client.add("counter", 1), CommError) << "the connection survived a replay";
  }
  TcpStore direct(client_options(server.port(), kToken));
  EXPECT_EQ(direct.add("counter", 0), 1) << "the replayed add was applied";
  EXPECT_TRUE(replayed);
}

// A fake store that answers the handshake as if it held any token: the client must refuse it.
TEST(StoreHandshakeTest, AServerWithoutTheTokenIsRefusedByTheClient) {
  int port = 0;
  const int listener = listen_loopback(&port);
  std::thread impostor([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    std::string hello, proof, client_nonce;
    const auto deadline = detail::Clock::now() + 5s;
    if (detail::read_frame(fd, &hello, 4096, deadline) == detail::IoStatus::kOk &&
        detail::check_hello(hello, &client_nonce).accepted) {
      const std::string server_nonce = detail::store_nonce();
      detail::write_frame(fd, detail::challenge_body(true, server_nonce), deadline);
      detail::read_frame(fd, &proof, 4096, deadline);
      detail::write_frame(
          fd,
          detail::verdict_body({true, detail::kOk, ""}, detail::store_key("a guess"), client_nonce,
                               server_nonce),
          deadline);
    }
    ::close(fd);
  });
  try {
    TcpStore client(client_options(port, kToken));
    FAIL() << "the client joined an impostor";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("did not prove that it holds the job's token"));
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr(kToken.substr(0, 8))));
  }
  impostor.join();
  ::close(listener);
}

// A server without a token admits a client that has one (both use the empty token's key), as
// hand-started workers always could.
TEST(StoreHandshakeTest, AServerWithoutATokenAdmitsEveryClient) {
  TcpStore server(server_options(""));
  TcpStore with(client_options(server.port(), kToken)), without(client_options(server.port(), ""));
  with.set_string("k", "v");
  EXPECT_EQ(without.get_string("k"), "v");
}

}  // namespace
}  // namespace brigade
