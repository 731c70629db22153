#pragma once
// ZeroMQ sockets authenticated and encrypted with CURVE (CurveZMQ: X25519 key agreement,
// XSalsa20-Poly1305 per message, through libsodium inside libzmq), for the roles that talk
// point to point outside the collectives: parameter servers and their workers (sync/ps/), the
// federated coordinator and its clients (fed/).
//
// Why ZeroMQ: it is what ps-lite (MXNet's and BytePS's parameter server) runs on; a server is
// one ROUTER socket that receives from every peer in order per peer and replies to any of them
// by identity, which is the whole pattern of push/pull and of a federated round; CURVE gives
// authenticated, encrypted peers with keys we create per job, and ZAP lets the server accept
// only the keys on its allow-list. gRPC (Flower's choice) would add code generation and a
// thread pool per server for the same few message shapes.
//
// Keys: every process creates a fresh key pair when the job starts and publishes its public
// key in the job's rendezvous store (which admits only holders of the job's token); a server
// publishes its endpoint next to its key. Secret keys never leave the process and are never
// logged. A connection whose key is not on the server's allow-list is refused by the ZAP
// handler (ZeroMQ drops it before any message is delivered) and the server logs the refusal
// with the peer's address.
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace brigade {

// A CURVE key pair, Z85-encoded (40 characters each).
struct CurveKeyPair {
  std::string public_key;
  std::string secret_key;
  static CurveKeyPair generate();
};

// The server's ROUTER socket. Binds tcp://<bind>: bind is "host" (an ephemeral port) or
// "host:port". ZeroMQ drops a connection whose message exceeds max_message_bytes before
// allocating it (ZMQ_MAXMSGSIZE). Only keys on the allow-list (public key -> peer index) may
// connect; the list may grow while the socket serves (a peer that joins late or rejoins with a
// new key). `what` names the server in errors ("a parameter server", "the coordinator") and
// bind_key the config key of its address.
class CurveServerSocket {
 public:
  CurveServerSocket(const CurveKeyPair& keys, std::map<std::string, int> allow,
                    const std::string& bind, int64_t max_message_bytes, const std::string& what,
                    const std::string& bind_key, std::function<void(const std::string&)> log);
  ~CurveServerSocket();
  CurveServerSocket(const CurveServerSocket&) = delete;
  CurveServerSocket& operator=(const CurveServerSocket&) = delete;

  // "tcp://127.0.0.1:41234": where peers connect.
  const std::string& endpoint() const { return endpoint_; }

  // Admits public_key as peer `peer`; a key the peer held before is dropped.
  void allow(const std::string& public_key, int peer);

  struct Received {
    zmq::message_t identity;  // routing id, for the reply
    int peer = -1;            // the peer the connection's key belongs to (from ZAP)
    zmq::multipart_t frames;  // the message itself
  };
  // Waits up to timeout for a message; nullopt when none came.
  std::optional<Received> receive(std::chrono::milliseconds timeout);
  // False when the peer is gone (its connection closed): ZMQ_ROUTER_MANDATORY reports it.
  bool send(const zmq::message_t& identity, zmq::multipart_t&& frames);

 private:
  void run_zap();

  zmq::context_t context_;
  zmq::socket_t zap_;  // REP on inproc://zeromq.zap.01, served by zap_thread_
  zmq::socket_t router_;
  std::mutex allow_mutex_;
  std::map<std::string, int> allow_;  // guarded by allow_mutex_
  std::function<void(const std::string&)> log_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread zap_thread_;
};

// A peer's connection to one server.
class CurveClientLink {
 public:
  CurveClientLink(const CurveKeyPair& keys, const std::string& server_public_key,
                  const std::string& endpoint);
  void send(zmq::multipart_t&& frames);
  // Waits up to timeout; nullopt when nothing came.
  std::optional<zmq::multipart_t> receive(std::chrono::milliseconds timeout);
  const std::string& endpoint() const { return endpoint_; }

 private:
  zmq::context_t context_;
  zmq::socket_t dealer_;
  std::string endpoint_;
};

}  // namespace brigade
