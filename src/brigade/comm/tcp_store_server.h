#pragma once
// The server half of TcpStore (internal): an accept thread plus one thread per connection,
// sharing a key-value map guarded by a mutex; wait requests block on a condition variable.
// Connection threads are few (one per rank) and mostly idle, so a thread each is simpler than
// an event loop and costs little.
#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

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
    std::thread thread;
    std::atomic<bool> done{false};
  };

  enum class Reply { kSend, kSendAndClose, kDrop };

  void accept_loop();
  void serve(Connection* conn);
  // Handles one authenticated request and says what to do with the connection.
  Reply handle(const std::string& request, std::string* reply);
  bool authenticate(int fd);

  std::string token_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;

  std::mutex conns_mu_;
  std::list<Connection> conns_;

  std::mutex data_mu_;
  std::condition_variable data_cv_;
  std::unordered_map<std::string, std::string> data_;
  int64_t data_bytes_ = 0;
};

}  // namespace brigade::detail
