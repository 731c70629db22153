#pragma once
// TcpStore: a rendezvous store served by rank 0 over TCP (torchrun's MASTER_ADDR:MASTER_PORT).
//
// Rank 0 constructs it with is_server = true: a server thread listens on host:port (127.0.0.1
// unless configured) and rank 0 itself connects as a client like everyone else. Other ranks
// retry connecting until the timeout, so start order does not matter.
//
// Protocol (tcp_store_protocol.h): frames of a u32 little-endian length and a body; the server
// refuses frames over 64 MiB + 16 KiB, keys over 4 KiB and malformed bodies by closing the
// connection. A connection starts with a handshake in which client and server prove to each
// other that they hold the job's token without sending it (store_handshake.h); if the server
// has a token (from BRIGADE_STORE_TOKEN by default; `brigade launch` makes one per job) a client
// with another token or none is refused, and a client refuses a server that cannot prove it has
// the client's token. Until its handshake passed, a connection may send frames of at most 4 KiB
// within 5 s, and at most 64 such connections are served at once; a client that finds the
// server busy retries until its timeout. Afterwards every frame is encrypted and authenticated
// per direction and in order, so an eavesdropper learns nothing but frame lengths and a
// tampered or replayed frame closes the connection. A server without a token warns once on
// stderr: its keys are public then. The token never appears in a message or a log.
#include <memory>
#include <mutex>
#include <string>

#include "brigade/comm/store.h"
#include "brigade/comm/store_handshake.h"

namespace brigade {

// The value of BRIGADE_STORE_TOKEN, or "" when unset (no authentication; the server warns).
std::string store_token_from_env();
// Longest token accepted (a ConfigError beyond).
inline constexpr size_t kMaxStoreTokenBytes = 1024;

struct TcpStoreOptions {
  std::string host = "127.0.0.1";  // where clients connect (MASTER_ADDR)
  int port = 29500;                // MASTER_PORT; 0 on the server picks a free port (port())
  bool is_server = false;          // true on rank 0: host the store in this process
  std::string bind_host;           // server only: address to bind; empty = host
  std::string token = store_token_from_env();  // at most 1 KiB (ConfigError otherwise)
  std::chrono::milliseconds timeout = std::chrono::seconds(30);  // connect and wait limit
  int rank = -1;  // only for messages ("rank 3: could not reach store ...")
};

namespace detail {
class TcpStoreServer;
}

class TcpStore : public Store {
 public:
  // Connects (and on the server first listens). Throws CommError(kTimeout) if the store cannot
  // be reached (or stays busy) within the timeout, CommError(kOther) if it refuses our token or
  // the server cannot listen, ConfigError for a bad port, timeout or token length.
  explicit TcpStore(TcpStoreOptions options);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<char>& value) override;
  std::vector<char> get(const std::string& key) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string describe() const override;

  // The port the store listens on (the one chosen by the kernel when options.port was 0).
  int port() const { return port_; }

 private:
  // Connects fd_, retrying until `deadline`; CommError(kTimeout) naming the address after it.
  void connect_once(std::chrono::steady_clock::time_point deadline);
  // Connects and passes the hello, retrying while the server is busy, until the timeout.
  void connect_and_hello();
  // Sends one request and returns the reply body; throws CommError if the connection fails.
  std::string round_trip(const std::string& request, std::chrono::milliseconds io_limit,
                         const char* what);
  std::string where() const;  // "rank 3: " or ""

  TcpStoreOptions options_;
  int port_;
  std::unique_ptr<detail::TcpStoreServer> server_;
  std::mutex mu_;  // one request at a time on the connection
  int fd_ = -1;
  detail::StoreChannel channel_;  // of the current connection, from the handshake
};

}  // namespace brigade
