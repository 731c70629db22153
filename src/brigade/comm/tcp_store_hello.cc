#include "brigade/comm/tcp_store_hello.h"

#include <algorithm>

#include "brigade/comm/socket_io.h"
#include "brigade/comm/tcp_store_protocol.h"

namespace brigade::detail {

std::string hello_body(const std::string& token) {
  return FrameWriter().u8(kHello).str(kStoreMagic).u32(kStoreProtocolVersion).str(token).body();
}

bool same_token(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char ca = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char cb = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(ca ^ cb);
  }
  return diff == 0;
}

HelloVerdict check_hello(const std::string& body, const std::string& token) {
  FrameReader in(body);
  uint8_t op = 0;
  uint32_t version = 0;
  std::string magic, theirs;
  const bool well_formed = in.u8(&op) && op == kHello && in.str(&magic, 64) &&
                           magic == kStoreMagic && in.u32(&version) &&
                           in.str(&theirs, kMaxStoreTokenBytes) && in.at_end();
  if (!well_formed) return {false, kBadRequest, "expected a brigade store hello"};
  if (version != kStoreProtocolVersion) {
    return {false, kRefused,
            "protocol version " + std::to_string(version) + " is not " +
                std::to_string(kStoreProtocolVersion)};
  }
  if (token.empty()) return {true, kOk, ""};
  if (theirs.empty()) {
    return {false, kRefused, "the store requires a token and this client sent no token"};
  }
  if (!same_token(theirs, token)) return {false, kRefused, "wrong token"};
  return {true, kOk, ""};
}

}  // namespace brigade::detail
