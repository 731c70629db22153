// The rendezvous store's server (TcpStore, rank 0's side of MASTER_ADDR:MASTER_PORT), fed
// mutated byte streams on a raw connection, as a stray or broken client would send them.
//
// The store's framing is being changed by another engineer, so nothing here knows it: the seed
// is recorded from a real TcpStore client talking to the server through a small proxy, and
// the server is judged through the public API only: after every input a fresh client must still
// set and get a key. A server that crashes, hangs or stops serving is the defect.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>

#include "brigade/base/error.h"
#include "brigade/comm/tcp_store.h"
#include "fuzz/fuzz_target.h"

namespace brigade::fuzz {

namespace {

constexpr const char* kToken = "fuzz-token";
constexpr int kReplyWaitMs = 50;  // how long a case waits for the server's answer

int listen_loopback(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(fd, 4) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw std::runtime_error("cannot listen on loopback");
  }
  *port = ntohs(a.sin_port);
  return fd;
}

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port));
  }
  return fd;
}

// Forwards one client connection to the server and returns what the client sent.
std::string record_session(int server_port, const std::function<void(int proxy_port)>& client) {
  int proxy_port = 0;
  const int listener = listen_loopback(&proxy_port);
  std::string sent;
  std::thread pump([&] {
    const int c = ::accept(listener, nullptr, nullptr);
    const int s = connect_loopback(server_port);
    pollfd fds[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
    char buf[65536];
    for (bool open = true; open;) {
      if (::poll(fds, 2, 5000) <= 0) break;
      for (int k = 0; k < 2 && open; ++k) {
        if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::read(fds[k].fd, buf, sizeof(buf));
        if (n <= 0) {
          open = false;
          break;
        }
        if (k == 0) sent.append(buf, static_cast<size_t>(n));
        (void)::send(fds[1 - k].fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
    }
    ::close(c);
    ::close(s);
  });
  client(proxy_port);
  pump.join();
  ::close(listener);
  return sent;
}

TcpStoreOptions client_options(int port) {
  TcpStoreOptions o;
  o.port = port;
  o.token = kToken;
  o.timeout = std::chrono::seconds(5);
  return o;
}

class StoreTarget final : public Target {
 public:
  StoreTarget() {
    TcpStoreOptions o = client_options(0);
    o.is_server = true;
    server_ = std::make_unique<TcpStore>(o);
    port_ = server_->port();
  }

  std::vector<std::string> seeds() override {
    std::vector<std::string> out;
    out.push_back(record_session(port_, [](int proxy) {
      TcpStore c(client_options(proxy));
      c.set("seed/key", {'v', 'a', 'l'});
      (void)c.get("seed/key");
      (void)c.add("seed/counter", 5);
      (void)c.check({"seed/key", "seed/missing"});
      c.wait({"seed/key"}, std::chrono::milliseconds(100));
    }));
    out.push_back(record_session(port_, [](int proxy) { TcpStore c(client_options(proxy)); }));
    return out;
  }

  Outcome run(std::string_view input) override {
    const int fd = connect_loopback(port_);
    (void)::send(fd, input.data(), input.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    // Drain the replies until the server closes or kReplyWaitMs passes; either is fine.
    char buf[4096];
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kReplyWaitMs);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      if (::read(fd, buf, sizeof(buf)) <= 0) break;
    }
    ::close(fd);
    // The server must still serve a well-behaved client.
    try {
      TcpStore c(client_options(port_));
      c.set("health", {'o', 'k'});
      if (c.get("health") != std::vector<char>{'o', 'k'}) throw std::logic_error("wrong value");
    } catch (const std::exception& e) {
      throw std::logic_error(std::string("the store stopped serving after this input: ") +
                             e.what());
    }
    return {};
  }

 private:
  std::unique_ptr<TcpStore> server_;
  int port_ = 0;
};

}  // namespace

std::unique_ptr<Target> make_store_target(const std::string&) {
  return std::make_unique<StoreTarget>();
}

}  // namespace brigade::fuzz
