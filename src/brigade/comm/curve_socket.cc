#include "brigade/comm/curve_socket.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "brigade/base/error.h"

namespace brigade {

namespace {

// ZAP (ZeroMQ RFC 27) is served on this inproc endpoint of the socket's context.
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr const char* kZapDomain = "brigade";

// Whether socket has a message within timeout. A signal (the first Ctrl-C, which training
// handles itself) interrupts zmq_poll with EINTR: the wait goes on for the time left.
bool wait_readable(zmq::socket_t& socket, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    try {
      return zmq::poll(&item, 1, std::max(left, std::chrono::milliseconds(0))) > 0;
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

std::string z85_of(const void* key32) {
  char z85[41];
  zmq_z85_encode(z85, static_cast<const uint8_t*>(key32), 32);
  return std::string(z85, 40);
}

}  // namespace

CurveKeyPair CurveKeyPair::generate() {
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) {
    throw IoError("ZeroMQ cannot create CURVE keys (libzmq built without libsodium?)");
  }
  return {.public_key = std::string(pub, 40), .secret_key = std::string(sec, 40)};
}

CurveServerSocket::CurveServerSocket(const CurveKeyPair& keys, std::map<std::string, int> allow,
                                     const std::string& bind, int64_t max_message_bytes,
                                     const std::string& what, const std::string& bind_key,
                                     std::function<void(const std::string&)> log)
    : zap_(context_, zmq::socket_type::rep),
      router_(context_, zmq::socket_type::router),
      allow_(std::move(allow)),
      log_(std::move(log)) {
  // The handler must be bound before the server socket accepts a CURVE handshake.
  zap_.bind(kZapEndpoint);
  zap_thread_ = std::thread([this] { run_zap(); });
  router_.set(zmq::sockopt::curve_server, true);
  router_.set(zmq::sockopt::curve_secretkey, keys.secret_key);
  router_.set(zmq::sockopt::zap_domain, kZapDomain);
  router_.set(zmq::sockopt::maxmsgsize, max_message_bytes);
  router_.set(zmq::sockopt::linger, 0);
  router_.set(zmq::sockopt::router_mandatory, true);
  // "host" alone takes an ephemeral port; a bracketed or dotted "host:port" keeps its port.
  const bool has_port = bind.find(':') != std::string::npos &&
                        (bind.front() != '[' || bind.find("]:") != std::string::npos);
  try {
    router_.bind(has_port ? "tcp://" + bind : fmt::format("tcp://{}:0", bind));
  } catch (const zmq::error_t& e) {
    stop_ = true;
    zap_thread_.join();
    throw ConfigError(
        fmt::format("{} = \"{}\": {} cannot bind there ({})", bind_key, bind, what, e.what()));
  }
  endpoint_ = router_.get(zmq::sockopt::last_endpoint);
}

CurveServerSocket::~CurveServerSocket() {
  stop_ = true;
  if (zap_thread_.joinable()) zap_thread_.join();
}

void CurveServerSocket::allow(const std::string& public_key, int peer) {
  std::lock_guard<std::mutex> lock(allow_mutex_);
  for (auto it = allow_.begin(); it != allow_.end();) {
    it = it->second == peer ? allow_.erase(it) : std::next(it);
  }
  allow_[public_key] = peer;
}

// Answers each handshake's request: 200 with the peer index as user id for a key on the
// allow-list, 400 otherwise (logged with the peer's address; the key itself is public, but the
// log names only the address).
void CurveServerSocket::run_zap() {
  while (!stop_) {
    if (!wait_readable(zap_, std::chrono::milliseconds(100))) continue;
    zmq::multipart_t request(zap_);
    // version, request id, domain, address, identity, mechanism, credentials...
    if (request.size() < 6) continue;
    const std::string version = request[0].to_string();
    const std::string request_id = request[1].to_string();
    const std::string address = request[3].to_string();
    const std::string mechanism = request[5].to_string();
    std::string status = "400", text = "refused", user;
    if (mechanism == "CURVE" && request.size() >= 7 && request[6].size() == 32) {
      std::lock_guard<std::mutex> lock(allow_mutex_);
      auto it = allow_.find(z85_of(request[6].data()));
      if (it != allow_.end()) {
        status = "200";
        text = "OK";
        user = std::to_string(it->second);
      }
    }
    if (status != "200" && log_) {
      log_(fmt::format("refused a connection from {}: {} key not on this job's allow-list", address,
                       mechanism));
    }
    zmq::multipart_t reply;
    reply.addstr(version);
    reply.addstr(request_id);
    reply.addstr(status);
    reply.addstr(text);
    reply.addstr(user);
    reply.addstr("");  // metadata
    reply.send(zap_);
  }
}

std::optional<CurveServerSocket::Received> CurveServerSocket::receive(
    std::chrono::milliseconds timeout) {
  if (!wait_readable(router_, timeout)) return std::nullopt;
  zmq::multipart_t all(router_);
  Received r;
  if (all.empty()) return std::nullopt;
  r.identity = all.pop();
  // The user id ZAP gave this connection: which peer's key it authenticated.
  const char* user = all.empty() ? nullptr : all[0].gets("User-Id");
  r.peer = user && *user ? std::atoi(user) : -1;
  r.frames = std::move(all);
  return r;
}

bool CurveServerSocket::send(const zmq::message_t& identity, zmq::multipart_t&& frames) {
  frames.push(zmq::message_t(identity.data(), identity.size()));
  try {
    frames.send(router_);
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return false;  // the peer's connection is gone
    throw;
  }
  return true;
}

CurveClientLink::CurveClientLink(const CurveKeyPair& keys, const std::string& server_public_key,
                                 const std::string& endpoint)
    : dealer_(context_, zmq::socket_type::dealer), endpoint_(endpoint) {
  dealer_.set(zmq::sockopt::curve_serverkey, server_public_key);
  dealer_.set(zmq::sockopt::curve_publickey, keys.public_key);
  dealer_.set(zmq::sockopt::curve_secretkey, keys.secret_key);
  dealer_.set(zmq::sockopt::linger, 2000);  // a final stop still leaves on close
  dealer_.set(zmq::sockopt::sndtimeo, 60000);
  dealer_.connect(endpoint);
}

void CurveClientLink::send(zmq::multipart_t&& frames) {
  // A send waits at most ZMQ_SNDTIMEO for room in the pipe to the server: a server that stopped
  // reading is a lost peer, not a hang.
  try {
    if (frames.send(dealer_)) return;
  } catch (const zmq::error_t& e) {
    if (e.num() != EAGAIN) throw;
  }
  throw CommError(CommError::Kind::kPeerLost,
                  fmt::format("the server at {} took no message for 60 s", endpoint_));
}

std::optional<zmq::multipart_t> CurveClientLink::receive(std::chrono::milliseconds timeout) {
  if (!wait_readable(dealer_, timeout)) return std::nullopt;
  return zmq::multipart_t(dealer_);
}

}  // namespace brigade
