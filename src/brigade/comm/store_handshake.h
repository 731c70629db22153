#pragma once
// How a TcpStore client and server (internal) prove to each other that they hold the job's
// token without sending it, and the sealed channel they talk over afterwards.
//
// Handshake, four plain frames (the first three bounded as strangers' frames are,
// tcp_store_protocol.h):
//   client  hello      kHello, magic, version, client nonce (32 random bytes)
//   server  challenge  status; kOk: "", u8 token_required, server nonce (32 random bytes)
//                      (kBusy / kRefused / kBadRequest: a message, and the connection closes)
//   client  proof      u8 has_token, MAC(K, "client" | cn | sn)
//   server  verdict    status, message; kOk: MAC(K, "server" | cn | sn)
// K is a 32-byte key hashed from the token (BLAKE2b, keyed for this protocol); a server without
// a token (token_required = 0) uses the key of the empty token, and so does its client. The
// server checks the client's proof before it proves itself, so a stranger learns nothing it
// could test token guesses against; a client checks the server's proof, so an impostor that
// does not hold the token cannot pose as the job's store. MACs are HMAC-SHA-512-256 (libsodium
// crypto_auth), compared in constant time.
//
// After the handshake every frame body is sealed (XSalsa20-Poly1305, libsodium secretbox) with
// a key per direction derived from K and both nonces, under a nonce that counts the frames of
// that direction: a tampered, replayed, reordered or dropped frame fails to open, and the
// connection is closed. An eavesdropper sees frame lengths only. With an empty token the keys
// are public: integrity against accidents, no secrecy (the server warns, tcp_store.h).
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "brigade/comm/socket_io.h"

namespace brigade::detail {

inline constexpr size_t kStoreNonceBytes = 32;
inline constexpr size_t kStoreKeyBytes = 32;
inline constexpr size_t kStoreMacBytes = 32;
inline constexpr size_t kStoreSealBytes = 16;  // what sealing adds to a frame body

using StoreKey = std::array<unsigned char, kStoreKeyBytes>;

// The handshake key of a token ("" for a server without a token).
StoreKey store_key(const std::string& token);

// 32 random bytes (libsodium).
std::string store_nonce();

// One direction of a connection after the handshake: seals what this side sends, or opens what
// the other side sent, counting frames.
class SealedDirection {
 public:
  SealedDirection() = default;
  SealedDirection(const StoreKey& key, const std::string& client_nonce,
                  const std::string& server_nonce, const char* label);
  std::string seal(const std::string& plain);
  // False (and *plain untouched) when the body was not sealed by the peer as the next frame.
  bool open(const std::string& body, std::string* plain);

 private:
  StoreKey key_{};
  uint64_t frames_ = 0;
};

struct StoreChannel {
  SealedDirection send, receive;
};

// The client side, on a connected socket: runs the handshake within `deadline`. On success
// returns the channel; otherwise nullopt with *status (kBusy, kRefused, ...; 0 when the server
// never answered, with *io saying why) and *message.
struct HandshakeFailure {
  IoStatus io = IoStatus::kOk;
  bool answered = false;
  uint8_t status = 0;
  std::string message;
  bool impostor = false;  // the server did not prove it holds the token
};
std::optional<StoreChannel> client_handshake(int fd, const std::string& token,
                                             Clock::time_point deadline, HandshakeFailure* failure);

// The server side's checks, step by step (tcp_store_server.cc drives the frames).
struct HelloVerdict {
  bool accepted = false;
  uint8_t status = 0;   // StoreStatus sent back
  std::string message;  // "" when accepted; never contains a token
};
// The hello: well formed and of this protocol version; *client_nonce receives its nonce.
HelloVerdict check_hello(const std::string& body, std::string* client_nonce);
std::string challenge_body(bool token_required, const std::string& server_nonce);
// The proof: made with the server's key.
HelloVerdict check_proof(const std::string& body, const StoreKey& key, bool token_required,
                         const std::string& client_nonce, const std::string& server_nonce);
// The verdict frame (with the server's proof when accepted).
std::string verdict_body(const HelloVerdict& verdict, const StoreKey& key,
                         const std::string& client_nonce, const std::string& server_nonce);
StoreChannel server_channel(const StoreKey& key, const std::string& client_nonce,
                            const std::string& server_nonce);

}  // namespace brigade::detail
