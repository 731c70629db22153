#pragma once
// Wire protocol of TcpStore (internal). Every message is a frame: u32 little-endian body length,
// then the body. Strings inside a body are a u32 length then the bytes. Requests start with an
// opcode byte, replies with a status byte.
//
//   hello  : kHello  str magic "brigade-store", u32 version, str token -> status, str message
//   set    : kSet    str key, str value                -> kOk
//   get    : kGet    str key                           -> kOk str value | kNotFound
//   check  : kCheck  u32 n, n x str key                -> kOk u8 all_present
//   wait   : kWait   u32 timeout_ms, u32 n, n x str key -> kOk | kTimeout
//   add    : kAdd    str key, i64 delta                -> kOk i64 new_value | kBadRequest
//
// A malformed request gets kBadRequest and the connection is closed.
#include <cstdint>

#include "brigade/comm/store.h"

namespace brigade::detail {

inline constexpr const char* kStoreMagic = "brigade-store";
inline constexpr uint32_t kStoreProtocolVersion = 1;
inline constexpr uint32_t kMaxStoreFrameBytes =
    static_cast<uint32_t>(kMaxStoreValueBytes + kMaxStoreKeyBytes + 12 * 1024);
inline constexpr uint32_t kMaxStoreKeysPerRequest = 65536;
inline constexpr int kMaxStoreConnections = 4096;
// The whole store (all values) may not exceed this; a set beyond it is refused.
inline constexpr int64_t kMaxStoreTotalBytes = int64_t{1} << 30;

enum StoreOp : uint8_t { kHello = 1, kSet = 2, kGet = 3, kCheck = 4, kWait = 5, kAdd = 6 };
enum StoreStatus : uint8_t {
  kOk = 0,
  kNotFound = 1,
  kTimedOut = 2,
  kRefused = 3,
  kBadRequest = 4,
  kFull = 5,
};

}  // namespace brigade::detail
