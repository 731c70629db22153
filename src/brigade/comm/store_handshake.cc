#include "brigade/comm/store_handshake.h"

#include <sodium.h>

#include <cstring>

#include "brigade/base/error.h"
#include "brigade/comm/tcp_store_protocol.h"

namespace brigade::detail {

namespace {

void require_sodium() {
  static const bool ready = sodium_init() >= 0;
  if (!ready) throw CommError(CommError::Kind::kOther, "libsodium could not be initialised");
}

const unsigned char* bytes_of(const std::string& s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

// MAC(K, label | cn | sn).
std::string proof(const StoreKey& key, const char* label, const std::string& client_nonce,
                  const std::string& server_nonce) {
  const std::string message = std::string(label) + client_nonce + server_nonce;
  std::string tag(kStoreMacBytes, '\0');
  crypto_auth(reinterpret_cast<unsigned char*>(tag.data()), bytes_of(message), message.size(),
              key.data());
  return tag;
}

bool proof_ok(const std::string& tag, const StoreKey& key, const char* label,
              const std::string& client_nonce, const std::string& server_nonce) {
  if (tag.size() != kStoreMacBytes) return false;
  const std::string message = std::string(label) + client_nonce + server_nonce;
  return crypto_auth_verify(bytes_of(tag), bytes_of(message), message.size(), key.data()) == 0;
}

// A frame of the handshake, read within the deadline and bounded as a stranger's.
IoStatus read_handshake_frame(int fd, std::string* body, Clock::time_point deadline) {
  return read_frame(fd, body, kMaxStoreHelloFrameBytes, deadline);
}

}  // namespace

StoreKey store_key(const std::string& token) {
  require_sodium();
  static const unsigned char kDomain[] = "brigade tcp store handshake key, v2";
  StoreKey key{};
  crypto_generichash(key.data(), key.size(), bytes_of(token), token.size(), kDomain,
                     sizeof(kDomain) - 1);
  return key;
}

std::string store_nonce() {
  require_sodium();
  std::string nonce(kStoreNonceBytes, '\0');
  randombytes_buf(nonce.data(), nonce.size());
  return nonce;
}

SealedDirection::SealedDirection(const StoreKey& key, const std::string& client_nonce,
                                 const std::string& server_nonce, const char* label) {
  const std::string input = std::string(label) + client_nonce + server_nonce;
  crypto_generichash(key_.data(), key_.size(), bytes_of(input), input.size(), key.data(),
                     key.size());
}

namespace {

// The frame counter, little-endian, as the 24-byte secretbox nonce (the rest zero): each key
// seals one direction only, so a counter never repeats under it.
std::array<unsigned char, crypto_secretbox_NONCEBYTES> frame_nonce(uint64_t frame) {
  std::array<unsigned char, crypto_secretbox_NONCEBYTES> nonce{};
  for (int i = 0; i < 8; ++i) nonce[i] = static_cast<unsigned char>(frame >> (8 * i));
  return nonce;
}

}  // namespace

std::string SealedDirection::seal(const std::string& plain) {
  static_assert(crypto_secretbox_MACBYTES == kStoreSealBytes);
  std::string body(plain.size() + kStoreSealBytes, '\0');
  const auto nonce = frame_nonce(frames_++);
  crypto_secretbox_easy(reinterpret_cast<unsigned char*>(body.data()), bytes_of(plain),
                        plain.size(), nonce.data(), key_.data());
  return body;
}

bool SealedDirection::open(const std::string& body, std::string* plain) {
  if (body.size() < kStoreSealBytes) return false;
  std::string out(body.size() - kStoreSealBytes, '\0');
  const auto nonce = frame_nonce(frames_);
  if (crypto_secretbox_open_easy(reinterpret_cast<unsigned char*>(out.data()), bytes_of(body),
                                 body.size(), nonce.data(), key_.data()) != 0) {
    return false;
  }
  ++frames_;
  *plain = std::move(out);
  return true;
}

std::optional<StoreChannel> client_handshake(int fd, const std::string& token,
                                             Clock::time_point deadline,
                                             HandshakeFailure* failure) {
  const std::string client_nonce = store_nonce();
  const std::string hello =
      FrameWriter().u8(kHello).str(kStoreMagic).u32(kStoreProtocolVersion).str(client_nonce).body();
  std::string reply;
  failure->io = write_frame(fd, hello, deadline);
  if (failure->io == IoStatus::kOk) failure->io = read_handshake_frame(fd, &reply, deadline);
  if (failure->io != IoStatus::kOk) return std::nullopt;
  FrameReader challenge(reply);
  uint8_t token_required = 0;
  std::string server_nonce;
  if (!challenge.u8(&failure->status) ||
      !challenge.str(&failure->message, kMaxStoreHelloFrameBytes)) {
    return std::nullopt;
  }
  failure->answered = true;
  if (failure->status != kOk) return std::nullopt;
  if (!challenge.u8(&token_required) || !challenge.str(&server_nonce, kStoreNonceBytes) ||
      server_nonce.size() != kStoreNonceBytes || !challenge.at_end()) {
    failure->status = kBadRequest;
    failure->message = "a malformed challenge";
    return std::nullopt;
  }
  // A server without a token accepts anyone: both sides then use the empty token's key.
  const StoreKey key = store_key(token_required ? token : std::string());
  const std::string proof_frame = FrameWriter()
                                      .u8(token.empty() ? 0 : 1)
                                      .str(proof(key, "client", client_nonce, server_nonce))
                                      .body();
  failure->io = write_frame(fd, proof_frame, deadline);
  if (failure->io == IoStatus::kOk) failure->io = read_handshake_frame(fd, &reply, deadline);
  if (failure->io != IoStatus::kOk) {
    failure->answered = false;
    return std::nullopt;
  }
  FrameReader verdict(reply);
  std::string server_proof;
  if (!verdict.u8(&failure->status) || !verdict.str(&failure->message, kMaxStoreHelloFrameBytes)) {
    failure->answered = false;
    return std::nullopt;
  }
  if (failure->status != kOk) return std::nullopt;
  if (!verdict.str(&server_proof, kStoreMacBytes) || !verdict.at_end() ||
      !proof_ok(server_proof, key, "server", client_nonce, server_nonce)) {
    failure->status = kRefused;
    failure->impostor = true;
    failure->message = "the server did not prove that it holds the job's token";
    return std::nullopt;
  }
  return StoreChannel{SealedDirection(key, client_nonce, server_nonce, "client to server"),
                      SealedDirection(key, client_nonce, server_nonce, "server to client")};
}

HelloVerdict check_hello(const std::string& body, std::string* client_nonce) {
  FrameReader in(body);
  uint8_t op = 0;
  uint32_t version = 0;
  std::string magic;
  const bool well_formed =
      in.u8(&op) && op == kHello && in.str(&magic, 64) && magic == kStoreMagic && in.u32(&version);
  if (!well_formed) return {false, kBadRequest, "expected a brigade store hello"};
  if (version != kStoreProtocolVersion) {
    return {false, kRefused,
            "protocol version " + std::to_string(version) + " is not " +
                std::to_string(kStoreProtocolVersion) + " (a brigade build of another version)"};
  }
  if (!in.str(client_nonce, kStoreNonceBytes) || client_nonce->size() != kStoreNonceBytes ||
      !in.at_end()) {
    return {false, kBadRequest, "expected a brigade store hello"};
  }
  return {true, kOk, ""};
}

std::string challenge_body(bool token_required, const std::string& server_nonce) {
  return FrameWriter().u8(kOk).str("").u8(token_required ? 1 : 0).str(server_nonce).body();
}

HelloVerdict check_proof(const std::string& body, const StoreKey& key, bool token_required,
                         const std::string& client_nonce, const std::string& server_nonce) {
  FrameReader in(body);
  uint8_t has_token = 0;
  std::string tag;
  if (!in.u8(&has_token) || !in.str(&tag, kStoreMacBytes) || !in.at_end()) {
    return {false, kBadRequest, "expected the client's proof"};
  }
  if (proof_ok(tag, key, "client", client_nonce, server_nonce)) return {true, kOk, ""};
  if (token_required && has_token == 0) {
    return {false, kRefused, "the store requires a token and this client sent no token"};
  }
  return {false, kRefused, "wrong token"};
}

std::string verdict_body(const HelloVerdict& verdict, const StoreKey& key,
                         const std::string& client_nonce, const std::string& server_nonce) {
  FrameWriter out;
  out.u8(verdict.status).str(verdict.message);
  if (verdict.accepted) out.str(proof(key, "server", client_nonce, server_nonce));
  return out.body();
}

StoreChannel server_channel(const StoreKey& key, const std::string& client_nonce,
                            const std::string& server_nonce) {
  return StoreChannel{SealedDirection(key, client_nonce, server_nonce, "server to client"),
                      SealedDirection(key, client_nonce, server_nonce, "client to server")};
}

}  // namespace brigade::detail
