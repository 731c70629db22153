#include "brigade/comm/gloo/tls_transport.h"

#include <gloo/transport/tcp/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/pair.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/epoll.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>

#include "brigade/base/error.h"

namespace brigade::detail {

namespace {

namespace tcp = gloo::transport::tcp;
using Clock = std::chrono::steady_clock;

// OpenSSL's queued errors of this thread as one line (and the queue emptied).
std::string ssl_error_text() {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    text += (text.empty() ? "" : "; ") + std::string(buf);
  }
  return text.empty() ? "no OpenSSL error queued" : text;
}

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

// The job's TLS context: this rank's Ed25519 key and a self-signed certificate of it, TLS 1.3
// only, a certificate required from both sides (the key in it is pinned after the handshake,
// so the chain itself is not judged), no session tickets.
SslCtxPtr make_ssl_ctx(const PeerIdentity& identity) {
  auto fail = [](const std::string& what) {
    return CommError(CommError::Kind::kOther,
                     "TLS transport: " + what + " failed (" + ssl_error_text() + ")");
  };
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr,
                                   reinterpret_cast<const unsigned char*>(identity.seed.data()),
                                   identity.seed.size()),
      EVP_PKEY_free);
  if (!key) throw fail("loading the Ed25519 key");
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  if (!cert) throw fail("creating the certificate");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -24 * 3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 365 * 24 * 3600);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("brigade peer"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  if (X509_set_pubkey(cert.get(), key.get()) != 1 ||
      X509_sign(cert.get(), key.get(), nullptr) == 0) {  // Ed25519 signs without a digest
    throw fail("signing the certificate");
  }

  SslCtxPtr ctx(SSL_CTX_new(TLS_method()));
  if (!ctx) throw fail("SSL_CTX_new");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION);
  if (SSL_CTX_use_certificate(ctx.get(), cert.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1) {
    throw fail("installing the certificate");
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                     [](int, X509_STORE_CTX*) { return 1; });
  // AES-128-GCM first: the fastest suite with AES-NI (about 6 GB/s a core here, 15% above
  // AES-256); both ends are brigade, so the first one is what runs.
  SSL_CTX_set_ciphersuites(
      ctx.get(), "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  // No read-ahead: OpenSSL then takes from the socket only the record it opens, so bytes that
  // arrive right after the handshake stay in the socket, where epoll sees them. (Reading ahead
  // measured no faster here.)
  // A peer that exits without close_notify reads as a closed connection (as on plain TCP);
  // Gloo's own framing still fails an operation cut short.
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  // A write reports each record it sent, and may be retried from a moved Op after WANT_WRITE.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return ctx;
}

class TlsDevice : public tcp::Device {
 public:
  TlsDevice(const tcp::attr& attr, SslCtxPtr ctx, std::vector<std::string> peer_keys)
      : tcp::Device(attr), ctx_(std::move(ctx)), peer_keys_(std::move(peer_keys)) {}

  std::shared_ptr<gloo::transport::Context> createContext(int rank, int size) override;

  SSL_CTX* ssl_ctx() const { return ctx_.get(); }
  const std::string& peer_key(int rank) const { return peer_keys_.at(rank); }

 private:
  SslCtxPtr ctx_;
  std::vector<std::string> peer_keys_;
};

class TlsPair : public tcp::Pair {
 public:
  TlsPair(tcp::Context* context, TlsDevice* device, int rank, std::chrono::milliseconds timeout)
      : tcp::Pair(context, device, rank, timeout),
        tls_device_(device),
        expected_key_(device->peer_key(rank)) {}

  ~TlsPair() override {
    std::lock_guard<std::mutex> lock(m_);
    if (state_ != CLOSED) {
      TlsPair::changeState(CLOSED);
    } else {
      free_ssl();
    }
  }

  // Device loop, pair lock held. The listening side's handshake advances here as bytes come.
  void handleReadWrite(int events) override {
    if (!tls_ready_) {
      if (is_client_) return;  // the connecting thread runs its handshake, holding the lock
      if (ssl_ == nullptr && !start_tls()) return;
      const int want = handshake_step();
      if (want > 0) device_->registerDescriptor(fd_, want, this);
      if (want != 0) return;
      device_->registerDescriptor(fd_, EPOLLIN, this);
      wake_if_buffered();
      return;
    }
    if (events & EPOLLOUT) {
      while (!tx_.empty() && write(tx_.front())) tx_.pop_front();
    }
    if ((events & EPOLLIN) || read_stalled_) {
      read_stalled_ = false;
      while (read()) {
      }
    }
    if (state_ == CONNECTED && (events & EPOLLOUT) && tx_.empty() && !read_stalled_) {
      device_->registerDescriptor(fd_, EPOLLIN, this);
    }
  }

 protected:
  bool write(tcp::Op& op) override {
    if (state_ == CLOSED || !tls_ready_) return false;
    gloo::NonOwningPtr<tcp::UnboundBuffer> buf;
    const auto opcode = op.getOpcode();
    if (opcode == tcp::Op::SEND_UNBOUND_BUFFER) {
      buf = gloo::NonOwningPtr<tcp::UnboundBuffer>(op.ubuf);
      if (!buf) return false;
    }
    for (;;) {
      std::array<struct iovec, 2> iov;
      int ioc = 0;
      const ssize_t left = prepareWrite(op, buf, iov.data(), ioc);
      if (left == 0) break;
      // A whole op that fits one record goes as one (its preamble alone would cost a record, a
      // syscall and a wake-up of the peer); a larger one goes as its preamble, then its payload.
      // Either way a retry after WANT_WRITE asks for the same bytes, as OpenSSL requires.
      struct iovec next = iov[0].iov_len > 0 ? iov[0] : iov[1];
      if (ioc == 2 && left <= kCoalesceBytes) {
        staging_.resize(static_cast<size_t>(left));
        std::memcpy(staging_.data(), iov[0].iov_base, iov[0].iov_len);
        std::memcpy(staging_.data() + iov[0].iov_len, iov[1].iov_base, iov[1].iov_len);
        next = {staging_.data(), staging_.size()};
      }
      ERR_clear_error();
      const int n =
          SSL_write(ssl_, next.iov_base, static_cast<int>(std::min<size_t>(next.iov_len, INT_MAX)));
      if (n > 0) {
        op.nwritten += n;
        continue;
      }
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_WANT_WRITE && !sync_) return false;  // queued; resumed on EPOLLOUT
      fatal_ = true;
      if (err == SSL_ERROR_SYSCALL && (errno == EPIPE || errno == ECONNRESET) && !sync_) {
        return false;  // as plain TCP: the read side reports the lost peer
      }
      signalException(what() + ": TLS write failed (" + ssl_error_text() + ")");
      return false;
    }
    writeComplete(op, buf, opcode);
    return true;
  }

  bool read() override {
    if (state_ == CLOSED || !tls_ready_) return false;
    gloo::NonOwningPtr<tcp::UnboundBuffer> buf;
    for (;;) {
      struct iovec iov {};
      const ssize_t want = prepareRead(rx_, buf, iov);
      if (want < 0) {
        // The target buffer is not registered yet. Plain TCP leaves the bytes in the socket and
        // epoll keeps calling; bytes OpenSSL already holds wake nobody, so ask for a call soon.
        wake_if_buffered();
        return false;
      }
      if (want == 0) break;
      ERR_clear_error();
      const int n =
          SSL_read(ssl_, iov.iov_base, static_cast<int>(std::min<size_t>(iov.iov_len, INT_MAX)));
      if (n > 0) {
        rx_.nread += n;
        continue;
      }
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_WANT_READ) {
        if (sync_) signalException(what() + ": read timeout");
        return false;
      }
      if (err == SSL_ERROR_ZERO_RETURN || err == SSL_ERROR_SYSCALL) {
        fatal_ = true;
        fail_read("Connection closed by peer " + peer_.str() + " (rank " + std::to_string(rank_) +
                  ", TLS" +
                  (err == SSL_ERROR_SYSCALL && errno != 0 ? std::string(": ") + std::strerror(errno)
                                                          : "") +
                  ")");
        return false;
      }
      fatal_ = true;
      // A changed, dropped, replayed or foreign record fails its authentication tag here.
      fail_read(what() + ": TLS read failed, the stream is not what the peer sealed (" +
                ssl_error_text() + ")");
      return false;
    }
    readComplete(buf);
    return true;
  }

  void changeState(state next) noexcept override {
    if (next == CLOSED) free_ssl();
    tcp::Pair::changeState(next);
  }

  void waitUntilConnected(std::unique_lock<std::mutex>& lock, bool useTimeout) override {
    tcp::Pair::waitUntilConnected(lock, useTimeout);
    if (tls_ready_) return;
    if (!is_client_) {
      waitUntil(
          [&] {
            throwIfException();
            return tls_ready_;
          },
          lock, useTimeout);
      return;
    }
    // The connecting side: the device loop cannot touch the socket while this thread holds the
    // pair's lock, so the handshake runs here, each wait bounded by what is left of the timeout.
    const auto limit =
        timeout_ > std::chrono::milliseconds(0) ? timeout_ : std::chrono::seconds(60);
    const auto deadline = Clock::now() + limit;
    if (ssl_ == nullptr && !start_tls()) throwIfException();
    for (;;) {
      const int want = handshake_step();
      if (want == 0) {
        wake_if_buffered();
        return;
      }
      if (want < 0) throwIfException();
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      struct pollfd pfd {
        .fd = fd_, .events = static_cast<short>(want == EPOLLOUT ? POLLOUT : POLLIN), .revents = 0
      };
      const int r = left.count() > 0 ? ::poll(&pfd, 1, static_cast<int>(left.count())) : 0;
      if (r == 0) {
        signalAndThrowException(what() + ": TLS handshake timeout after " +
                                std::to_string(limit.count()) + " ms");
      }
      if (r < 0 && errno != EINTR) {
        signalAndThrowException(what() +
                                ": poll during the TLS handshake: " + std::strerror(errno));
      }
    }
  }

  void verifyConnected() override {
    tcp::Pair::verifyConnected();
    if (!tls_ready_) signalAndThrowException(what() + ": TLS handshake not finished");
  }

 private:
  std::string what() const {
    return "pair with rank " + std::to_string(rank_) + " (" + peer_.str() + ")";
  }

  // Bytes OpenSSL already holds wake no epoll: when there are any, the device loop is asked
  // for a call soon (EPOLLOUT fires at once), and handleReadWrite reads them.
  void wake_if_buffered() {
    if (SSL_pending(ssl_) > 0 || SSL_has_pending(ssl_)) {
      read_stalled_ = true;
      device_->registerDescriptor(fd_, EPOLLIN | EPOLLOUT, this);
    }
  }

  // Fails the pair from the read side. Gloo signals the receives still queued, but not the one
  // whose bytes were arriving (rx_ took it off the queue), which would then wait out its timeout:
  // it goes back on the queue first, so it fails now with this message.
  void fail_read(const std::string& message) {
    if (rx_.getOpcode() == tcp::Op::SEND_UNBOUND_BUFFER && rx_.nread >= sizeof(rx_.preamble)) {
      gloo::NonOwningPtr<tcp::UnboundBuffer> receiving(rx_.ubuf);
      if (receiving) {
        localPendingRecv_[rx_.preamble.slot].emplace_front(rx_.ubuf, rx_.offset, rx_.nbytes);
      }
    }
    signalException(message);
  }

  bool start_tls() {
    ssl_ = SSL_new(tls_device_->ssl_ctx());
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
      signalException(what() + ": SSL_new failed (" + ssl_error_text() + ")");
      return false;
    }
    if (is_client_) {
      SSL_set_connect_state(ssl_);
    } else {
      SSL_set_accept_state(ssl_);
    }
    return true;
  }

  // One step of the handshake: 0 when it is done and the peer proved its pinned key, EPOLLIN or
  // EPOLLOUT for what it waits on, -1 after a failure (signalled; the pair is closed).
  int handshake_step() {
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl_);
    if (r == 1) {
      if (!peer_proved_expected_key()) {
        fatal_ = true;
        signalException(what() + ": the peer proved a key other than the one rank " +
                        std::to_string(rank_) +
                        " published in the job's store; refusing the connection");
        return -1;
      }
      tls_ready_ = true;
      cv_.notify_all();
      return 0;
    }
    const int err = SSL_get_error(ssl_, r);
    if (err == SSL_ERROR_WANT_READ) return EPOLLIN;
    if (err == SSL_ERROR_WANT_WRITE) return EPOLLOUT;
    fatal_ = true;
    signalException(what() + ": TLS handshake failed (" + ssl_error_text() + ")");
    return -1;
  }

  bool peer_proved_expected_key() const {
    X509* cert = SSL_get1_peer_certificate(ssl_);
    if (cert == nullptr) return false;
    bool same = false;
    EVP_PKEY* key = X509_get0_pubkey(cert);
    unsigned char raw[kPeerKeyBytes];
    size_t len = sizeof(raw);
    if (key != nullptr && EVP_PKEY_get_id(key) == EVP_PKEY_ED25519 &&
        EVP_PKEY_get_raw_public_key(key, raw, &len) == 1 && len == kPeerKeyBytes &&
        expected_key_.size() == kPeerKeyBytes) {
      same = CRYPTO_memcmp(raw, expected_key_.data(), kPeerKeyBytes) == 0;
    }
    X509_free(cert);
    return same;
  }

  void free_ssl() noexcept {
    if (ssl_ == nullptr) return;
    if (tls_ready_ && !fatal_) SSL_shutdown(ssl_);  // close_notify, best effort
    SSL_free(ssl_);
    ssl_ = nullptr;
    tls_ready_ = false;
  }

  // One TLS record's worth of plaintext (RFC 8446: 2^14 bytes).
  static constexpr ssize_t kCoalesceBytes = 16384;

  const TlsDevice* tls_device_;
  const std::string expected_key_;
  std::vector<char> staging_;  // a small op's preamble and payload, written as one record
  SSL* ssl_ = nullptr;
  bool tls_ready_ = false;     // handshake done and the peer's key checked
  bool fatal_ = false;         // no close_notify after a failure
  bool read_stalled_ = false;  // decrypted bytes wait for a buffer to be registered
};

class TlsContext : public tcp::Context {
 public:
  TlsContext(std::shared_ptr<TlsDevice> device, int rank, int size)
      : tcp::Context(device, rank, size), tls_device_(std::move(device)) {}

  std::unique_ptr<gloo::transport::Pair>& createPair(int rank) override {
    pairs_[rank] = std::make_unique<TlsPair>(this, tls_device_.get(), rank, getTimeout());
    return pairs_[rank];
  }

 private:
  std::shared_ptr<TlsDevice> tls_device_;
};

std::shared_ptr<gloo::transport::Context> TlsDevice::createContext(int rank, int size) {
  return std::make_shared<TlsContext>(std::static_pointer_cast<TlsDevice>(shared_from_this()), rank,
                                      size);
}

}  // namespace

std::shared_ptr<gloo::transport::Device> create_tls_device(const gloo::transport::tcp::attr& attr,
                                                           const PeerIdentity& identity,
                                                           std::vector<std::string> peer_keys) {
  return std::make_shared<TlsDevice>(tcp::CreateDeviceAttr(attr), make_ssl_ctx(identity),
                                     std::move(peer_keys));
}

}  // namespace brigade::detail
