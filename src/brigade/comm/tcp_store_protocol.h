#pragma once
// Wire protocol of TcpStore (internal). Every message is a frame: u32 little-endian body length,
// then the body. Strings inside a body are a u32 length then the bytes. Requests start with an
// opcode byte, replies with a status byte.
//
//   handshake (store_handshake.h): hello, challenge, proof, verdict; then every body below is
//   sealed (encrypted and authenticated, 16 bytes more)
//   set    : kSet    str key, str value                -> kOk | kFull
//   get    : kGet    str key                           -> kOk str value | kNotFound
//   check  : kCheck  u32 n, n x str key                -> kOk u8 all_present
//   wait   : kWait   u32 timeout_ms, u32 n, n x str key -> kOk | kTimeout
//   add    : kAdd    str key, i64 delta                -> kOk i64 new_value | kBadRequest
//                                                         | kOverflow i64 current_value
//
// A malformed request gets kBadRequest and the connection is closed.
//
// Until a connection has passed its handshake it is a stranger: its frames may hold at most
// kMaxStoreHelloFrameBytes, it must finish the handshake within kStoreHelloTimeout of being
// accepted, and at most kMaxStorePendingConnections strangers are served at once (the next one
// gets kBusy and is closed). Only authenticated connections may send frames up to
// kMaxStoreFrameBytes, and even theirs are read in chunks, the buffer growing with the bytes
// that arrive, never sized from the announced length alone.
#include <chrono>
#include <cstdint>

#include "brigade/comm/store.h"
#include "brigade/comm/tcp_store.h"

namespace brigade::detail {

inline constexpr const char* kStoreMagic = "brigade-store";
inline constexpr uint32_t kStoreProtocolVersion = 2;  // 2: the token-free handshake
inline constexpr uint32_t kMaxStoreFrameBytes =
    static_cast<uint32_t>(kMaxStoreValueBytes + kMaxStoreKeyBytes + 12 * 1024);
inline constexpr uint32_t kMaxStoreKeysPerRequest = 65536;
// Authenticated connections (one per rank and store object).
inline constexpr int kMaxStoreConnections = 4096;
// The whole store (all keys and values) may not exceed this; a set beyond it is refused.
inline constexpr int64_t kMaxStoreTotalBytes = int64_t{1} << 30;

// Limits for connections that have not yet passed the hello.
inline constexpr uint32_t kMaxStoreHelloFrameBytes = 4096;
using brigade::kMaxStoreTokenBytes;  // 1 KiB: fits a hello with room to spare
inline constexpr std::chrono::seconds kStoreHelloTimeout{5};
inline constexpr int kMaxStorePendingConnections = 64;
// Once a frame's length has arrived, its body must keep coming: an authenticated client that
// sends nothing for this long in the middle of a frame is disconnected.
inline constexpr std::chrono::seconds kStoreFrameStallTimeout{30};

enum StoreOp : uint8_t { kHello = 1, kSet = 2, kGet = 3, kCheck = 4, kWait = 5, kAdd = 6 };
enum StoreStatus : uint8_t {
  kOk = 0,
  kNotFound = 1,
  kTimedOut = 2,
  kRefused = 3,
  kBadRequest = 4,
  kFull = 5,
  kOverflow = 6,  // add: the result would not fit in int64; the value is unchanged
  kBusy = 7,      // hello: too many connections; the client may retry
};

}  // namespace brigade::detail
