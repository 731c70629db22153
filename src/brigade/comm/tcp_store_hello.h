#pragma once
// The first frame of every TcpStore connection (internal): the client's hello and the server's
// verdict on it. The server's token is compared in constant time, and no reply ever contains a
// token, so neither a refusal nor its timing tells a guessing client how close it came.
#include <cstdint>
#include <string>

namespace brigade::detail {

// The hello body a client sends (opcode, magic, protocol version, token).
std::string hello_body(const std::string& token);

struct HelloVerdict {
  bool accepted = false;
  uint8_t status = 0;   // StoreStatus sent back
  std::string message;  // "" when accepted; never contains a token
};

// What the server answers to hello frame `body` when its own token is `token` (empty: any
// client is accepted).
HelloVerdict check_hello(const std::string& body, const std::string& token);

// Equal strings, compared without an early exit.
bool same_token(const std::string& a, const std::string& b);

}  // namespace brigade::detail
