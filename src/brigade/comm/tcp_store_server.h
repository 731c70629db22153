#pragma once
// The server half of TcpStore (internal): an accept thread plus one thread per connection,
// sharing a key-value map guarded by a mutex; wait requests block on a condition variable.
// Connection threads are few (one per rank) and mostly idle, so a thread each is simpler than
// an event loop and costs little.
//
// A connection is a stranger until its handshake proves it holds the token (store_handshake.h),
// and strangers get little (tcp_store_protocol.h): handshake frames of at most 4 KiB, a few
// seconds for the whole handshake, and no more than 64 of them at a time, counted apart from the
// authenticated ones so that strangers cannot use up the ranks' slots. Extra connections are
// refused at once. Afterwards every frame is sealed (store_handshake.h); one that fails to open
// closes its connection.
#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "brigade/comm/socket_io.h"
#include "brigade/comm/store_handshake.h"

namespace brigade::detail {

class TcpStoreServer {
 public:
  // Listens on bind_host:port (0 = any free port). Throws CommError(kOther) if it cannot.
  TcpStoreServer(const std::string& bind_host, int port, std::string token);
  ~TcpStoreServer();  // stops accepting, closes connections, joins every thread
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }

 private:
  struct Connection {
    int fd = -1;
    Clock::time_point accepted;  // the hello deadline counts from here
    std::thread thread;
    std::atomic<bool> done{false};
    StoreChannel channel;  // set by the handshake
  };

  enum class Reply { kSend, kSendAndClose, kDrop };

  void accept_loop();
  void serve(Connection* conn);
  // Reads and answers the hello; true when the connection may send requests.
  bool authenticate(Connection* conn);
  // Handles one authenticated request and says what to do with the connection.
  Reply handle(const std::string& request, std::string* reply);
  // Stores value under key if the store's total stays within kMaxStoreTotalBytes; false if not.
  // Needs data_mu_.
  bool put_locked(const std::string& key, std::string value);

  std::string token_;
  StoreKey key_;  // of token_ (store_handshake.h)
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;

  std::mutex conns_mu_;
  std::list<Connection> conns_;
  std::atomic<int> pending_{0};        // accepted, hello not yet answered
  std::atomic<int> authenticated_{0};  // passed the hello, still open

  std::mutex data_mu_;
  std::condition_variable data_cv_;
  std::unordered_map<std::string, std::string> data_;
  int64_t data_bytes_ = 0;  // keys and values
};

}  // namespace brigade::detail
