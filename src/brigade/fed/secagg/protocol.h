#pragma once
// Secure aggregation (Bonawitz, Ivanov, Kreuter, Marcedone, McMahan, Patel, Ramage, Segal and
// Seth, "Practical Secure Aggregation for Privacy-Preserving Machine Learning", CCS 2017), the
// variant for a semi-honest server: the coordinator learns the sum of the surviving clients'
// updates and nothing else about any one of them, even when clients drop out mid-round. One
// round, in the paper's terms:
//
//   U1  the clients that advertised keys: the roster. v's Shamir share number is 1 + its rank.
//   U2  the clients whose shares the server forwarded: each y_u is masked against U2.
//   U3  the clients whose masked input arrived: their updates make the sum.
//   t   the threshold: every step needs t clients, and t survivors' reveals unmask.
//
//   1 advertise  u makes two X25519 key pairs, c (crypto_box) and s (mask agreement), and sends
//                KeyAdvert(c_pk, s_pk); the server answers every client with the Roster of U1.
//   2 share      u draws a self-mask seed b_u, splits s_sk_u and b_u t-of-|U1| (shamir.h) and
//                seals v's two shares for v (sealed_share.h: crypto_box, bound to u, v and the
//                round) -> ShareBundle. The server forwards each v its ShareInbox.
//   3 mask       y_u = x_u + PRG(b_u) + sum_{v in U2, v > u} PRG(s_uv)
//                            - sum_{v in U2, v < u} PRG(s_uv)   (mod 2^32, masking.h),
//                x_u the fixed-point update (fixed_point.h) -> MaskedInput.
//   4 unmask     the server sends UnmaskRequest(U3, U2 \ U3); each survivor reveals its shares
//                of b_v for v in U3 and of s_sk_v for v in U2 \ U3, never both for one v ->
//                UnmaskReply. With t replies the server rebuilds those secrets, takes the self
//                masks of U3 and the pairwise masks between U3 and the dropped off the sum of
//                the y_u, and has sum_{u in U3} x_u exactly.
//
// Pairwise masks cancel between two survivors; the self mask is there for a y_u that arrives
// after the server has declared u dropped and rebuilt s_sk_u: honest clients never reveal both
// halves of one client. The server together with fewer than t clients learns nothing beyond the
// sum. A server that lied about who dropped could ask some survivors for b_u and others for
// s_sk_u; each client answers once, so the two groups are disjoint, and t > |U1| / 2 keeps both
// from reaching t (the paper's variant for a server that may deviate asks t > 2|U1| / 3 and
// signatures; this one assumes the coordinator follows the protocol).
//
// Beyond the paper, so that a corrupted share fails the round instead of giving a wrong sum:
// the bundle carries a commitment to b_u, and the server checks every rebuilt b_u against it
// and every rebuilt s_sk_v against s_pk_v.
//
// The state machines (secagg_client.h, secagg_server.h) take and give the structs below; wire.h
// turns them into bytes for a ZeroMQ frame. Every struct that came from the other side is
// checked before use, and a refused one changes nothing.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/fed/secagg/fixed_point.h"

namespace brigade::secagg {

// Shamir over GF(2^8) numbers its shares 1..255: the roster's bound.
inline constexpr int kMaxClients = 255;
// The longest update (2^28 values, 1 GiB of uint32: the federated messages' kFedMaxValues).
inline constexpr int64_t kMaxValues = int64_t{1} << 28;

inline constexpr size_t kKeyBytes = 32;
// One client's sealed pair of shares: nonce (24) + MAC (16) + plaintext (100, sealed_share.h).
inline constexpr size_t kSealedShareBytes = 140;

using PublicKey = std::array<uint8_t, kKeyBytes>;  // X25519
using Digest = std::array<uint8_t, 32>;            // BLAKE2b-256
using ShareValue = std::array<uint8_t, 32>;        // one Shamir share of a 32-byte secret
using SealedBytes = std::array<uint8_t, kSealedShareBytes>;

// Which round a message belongs to; bound into every sealed share, seed and message header.
struct RoundId {
  uint64_t run_tag = 0;  // the job's tag (fed_message.h)
  int64_t round = 0;     // >= 0
  int64_t attempt = 0;   // >= 0: a retried round is a new secure-aggregation round
};
inline bool operator==(const RoundId& a, const RoundId& b) {
  return a.run_tag == b.run_tag && a.round == b.round && a.attempt == b.attempt;
}

struct RoundParams {
  RoundId id;
  int threshold = 0;   // t: 2 .. kMaxClients, and at most fixed.max_clients
  int64_t length = 0;  // values per update: 1 .. kMaxValues
  FixedPoint fixed;    // how updates are quantised (max_clients bounds the roster too)
};
// Whether params are usable; if not, *why names the field, its value and what is allowed.
bool validate_round_params(const RoundParams& params, std::string* why);

// Step 1, client -> server.
struct KeyAdvert {
  uint32_t client = 0;
  PublicKey c_pk{};  // encrypts the shares sent to this client
  PublicKey s_pk{};  // agrees the pairwise mask seeds
};

// Step 1, server -> every client in it: U1, sorted by client, no client twice.
struct Roster {
  std::vector<KeyAdvert> clients;
};

// One sender's shares for one recipient, sealed for the recipient.
struct SealedShare {
  uint32_t sender = 0;
  uint32_t recipient = 0;
  SealedBytes box{};
};

// Step 2, client -> server: a sealed share for every other client of the roster.
struct ShareBundle {
  uint32_t sender = 0;
  Digest seed_commitment{};  // commit_seed(b_sender): checks the rebuilt seed
  std::vector<SealedShare> shares;
};

// Step 2, server -> one client of U2: the shares the other clients of U2 sealed for it.
struct ShareInbox {
  uint32_t recipient = 0;
  std::vector<SealedShare> shares;
};

// Step 3, client -> server: y_u, params.length values.
struct MaskedInput {
  uint32_t client = 0;
  std::vector<uint32_t> masked;
};

// Step 4, server -> every survivor: U3 and U2 \ U3, each sorted, disjoint.
struct UnmaskRequest {
  std::vector<uint32_t> survivors;
  std::vector<uint32_t> dropped;
};

// A share the replying client holds of `owner`'s secret.
struct RevealedShare {
  uint32_t owner = 0;
  ShareValue share{};
};

// Step 4, survivor -> server: a share of b_v for each survivor v and of s_sk_v for each dropped
// v, in the request's order.
struct UnmaskReply {
  uint32_t client = 0;
  std::vector<RevealedShare> seed_shares;
  std::vector<RevealedShare> key_shares;
};

namespace detail {
// Sets *why and returns false: the refusal path of every check here.
bool refuse(std::string* why, std::string reason);
// 1 + v's rank in the sorted roster, or 0 when v is not in it.
uint8_t share_number(const Roster& roster, uint32_t client);
}  // namespace detail

}  // namespace brigade::secagg
