#include "brigade/fed/secagg/wire.h"

#include <fmt/format.h>

#include <cstring>

namespace brigade::secagg {
namespace {

class Writer {
 public:
  Writer(SecAggType type, uint32_t client, const RoundId& id, size_t body_bytes) {
    bytes_.reserve(kHeaderBytes + body_bytes);
    u32(kSecAggMagic);
    u32(kSecAggVersion);
    u32(static_cast<uint32_t>(type));
    u32(client);
    u64(id.run_tag);
    u64(static_cast<uint64_t>(id.round));
    u64(static_cast<uint64_t>(id.attempt));
  }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void raw(const uint8_t* p, size_t n) { bytes_.insert(bytes_.end(), p, p + n); }
  Bytes take() { return std::move(bytes_); }

 private:
  Bytes bytes_;
};

// Reads fields off a span; every read is checked against what is left.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t left() const { return bytes_.size() - pos_; }
  bool u32(uint32_t* v) {
    if (left() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= static_cast<uint32_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return true;
  }
  bool u64(uint64_t* v) {
    if (left() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= static_cast<uint64_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return true;
  }
  bool raw(uint8_t* out, size_t n) {
    if (left() < n) return false;
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

template <typename T>
std::optional<T> refused(std::string* why, std::string reason) {
  detail::refuse(why, std::move(reason));
  return std::nullopt;
}

bool read_header(Reader* r, WireHeader* h, std::string* why) {
  uint32_t magic = 0, version = 0, type = 0;
  uint64_t round = 0, attempt = 0;
  if (!r->u32(&magic) || !r->u32(&version) || !r->u32(&type) || !r->u32(&h->client) ||
      !r->u64(&h->id.run_tag) || !r->u64(&round) || !r->u64(&attempt)) {
    return detail::refuse(why, fmt::format("a secure-aggregation message shorter than its {}-byte "
                                           "header",
                                           kHeaderBytes));
  }
  if (magic != kSecAggMagic) return detail::refuse(why, fmt::format("bad magic 0x{:08x}", magic));
  if (version != kSecAggVersion) {
    return detail::refuse(why, fmt::format("secure-aggregation version {} (this build speaks {})",
                                           version, kSecAggVersion));
  }
  if (type < static_cast<uint32_t>(SecAggType::kAdvert) ||
      type > static_cast<uint32_t>(SecAggType::kUnmaskReply)) {
    return detail::refuse(why, fmt::format("unknown secure-aggregation message type {}", type));
  }
  h->type = static_cast<SecAggType>(type);
  h->id.round = static_cast<int64_t>(round);
  h->id.attempt = static_cast<int64_t>(attempt);
  return true;
}

// Reads the header and checks it is a `type` message of round `expected`.
bool open_message(Reader* r, SecAggType type, const RoundId& expected, WireHeader* h,
                  std::string* why) {
  if (!read_header(r, h, why)) return false;
  if (h->type != type) {
    return detail::refuse(why, fmt::format("a {} message where a {} was expected",
                                           secagg_type_name(h->type), secagg_type_name(type)));
  }
  if (!(h->id == expected)) {
    return detail::refuse(
        why, fmt::format("a {} of run {:016x} round {} attempt {} (expected {:016x} round {} "
                         "attempt {})",
                         secagg_type_name(type), h->id.run_tag, h->id.round, h->id.attempt,
                         expected.run_tag, expected.round, expected.attempt));
  }
  return true;
}

// Reads a count and checks it against `most` and the bytes left for entries of `entry` bytes
// (and `after` bytes that must follow them at the least).
bool read_count(Reader* r, const char* what, uint32_t most, size_t entry, size_t after,
                uint32_t* count, std::string* why) {
  if (!r->u32(count)) return detail::refuse(why, fmt::format("{}: no count", what));
  if (*count > most) {
    return detail::refuse(why, fmt::format("{}: a count of {} (at most {})", what, *count, most));
  }
  if (r->left() < static_cast<size_t>(*count) * entry + after) {
    return detail::refuse(why, fmt::format("{}: {} bytes left for {} entries of {} bytes", what,
                                           r->left(), *count, entry));
  }
  return true;
}

bool at_end(const Reader& r, const char* what, std::string* why) {
  if (r.left() == 0) return true;
  return detail::refuse(why, fmt::format("{}: {} bytes after its end", what, r.left()));
}

bool client_zero(const WireHeader& h, const char* what, std::string* why) {
  if (h.client == 0) return true;
  return detail::refuse(why, fmt::format("{}: header client {} (must be 0)", what, h.client));
}

inline constexpr size_t kRosterEntry = 4 + 2 * kKeyBytes;
inline constexpr size_t kSealedEntry = 4 + kSealedShareBytes;
inline constexpr size_t kRevealedEntry = 4 + sizeof(ShareValue);

}  // namespace

const char* secagg_type_name(SecAggType type) {
  switch (type) {
    case SecAggType::kAdvert:
      return "key advert";
    case SecAggType::kRoster:
      return "roster";
    case SecAggType::kShareBundle:
      return "share bundle";
    case SecAggType::kShareInbox:
      return "share inbox";
    case SecAggType::kMaskedInput:
      return "masked input";
    case SecAggType::kUnmaskRequest:
      return "unmask request";
    case SecAggType::kUnmaskReply:
      return "unmask reply";
  }
  return "unknown";
}

std::optional<WireHeader> peek_header(std::span<const uint8_t> bytes, std::string* why) {
  Reader r(bytes);
  WireHeader h;
  if (!read_header(&r, &h, why)) return std::nullopt;
  return h;
}

Bytes encode_advert(const KeyAdvert& advert, const RoundId& id) {
  Writer w(SecAggType::kAdvert, advert.client, id, 2 * kKeyBytes);
  w.raw(advert.c_pk.data(), kKeyBytes);
  w.raw(advert.s_pk.data(), kKeyBytes);
  return w.take();
}

std::optional<KeyAdvert> decode_advert(std::span<const uint8_t> bytes, const RoundId& expected,
                                       std::string* why) {
  Reader r(bytes);
  WireHeader h;
  if (!open_message(&r, SecAggType::kAdvert, expected, &h, why)) return std::nullopt;
  KeyAdvert a;
  a.client = h.client;
  if (!r.raw(a.c_pk.data(), kKeyBytes) || !r.raw(a.s_pk.data(), kKeyBytes)) {
    return refused<KeyAdvert>(why, "key advert: shorter than its two keys");
  }
  if (!at_end(r, "key advert", why)) return std::nullopt;
  return a;
}

Bytes encode_roster(const Roster& roster, const RoundId& id) {
  Writer w(SecAggType::kRoster, 0, id, 4 + roster.clients.size() * kRosterEntry);
  w.u32(static_cast<uint32_t>(roster.clients.size()));
  for (const KeyAdvert& a : roster.clients) {
    w.u32(a.client);
    w.raw(a.c_pk.data(), kKeyBytes);
    w.raw(a.s_pk.data(), kKeyBytes);
  }
  return w.take();
}

std::optional<Roster> decode_roster(std::span<const uint8_t> bytes, const RoundId& expected,
                                    std::string* why) {
  Reader r(bytes);
  WireHeader h;
  uint32_t count = 0;
  if (!open_message(&r, SecAggType::kRoster, expected, &h, why) || !client_zero(h, "roster", why) ||
      !read_count(&r, "roster", kMaxClients, kRosterEntry, 0, &count, why)) {
    return std::nullopt;
  }
  Roster roster;
  roster.clients.resize(count);
  for (KeyAdvert& a : roster.clients) {
    r.u32(&a.client);
    r.raw(a.c_pk.data(), kKeyBytes);
    r.raw(a.s_pk.data(), kKeyBytes);
  }
  if (!at_end(r, "roster", why)) return std::nullopt;
  return roster;
}

Bytes encode_share_bundle(const ShareBundle& bundle, const RoundId& id) {
  Writer w(SecAggType::kShareBundle, bundle.sender, id,
           sizeof(Digest) + 4 + bundle.shares.size() * kSealedEntry);
  w.raw(bundle.seed_commitment.data(), sizeof(Digest));
  w.u32(static_cast<uint32_t>(bundle.shares.size()));
  for (const SealedShare& s : bundle.shares) {
    w.u32(s.recipient);
    w.raw(s.box.data(), s.box.size());
  }
  return w.take();
}

std::optional<ShareBundle> decode_share_bundle(std::span<const uint8_t> bytes,
                                               const RoundId& expected, std::string* why) {
  Reader r(bytes);
  WireHeader h;
  if (!open_message(&r, SecAggType::kShareBundle, expected, &h, why)) return std::nullopt;
  ShareBundle bundle;
  bundle.sender = h.client;
  uint32_t count = 0;
  if (!r.raw(bundle.seed_commitment.data(), sizeof(Digest))) {
    return refused<ShareBundle>(why, "share bundle: no seed commitment");
  }
  if (!read_count(&r, "share bundle", kMaxClients - 1, kSealedEntry, 0, &count, why)) {
    return std::nullopt;
  }
  bundle.shares.resize(count);
  for (SealedShare& s : bundle.shares) {
    s.sender = h.client;
    r.u32(&s.recipient);
    r.raw(s.box.data(), s.box.size());
  }
  if (!at_end(r, "share bundle", why)) return std::nullopt;
  return bundle;
}

Bytes encode_share_inbox(const ShareInbox& inbox, const RoundId& id) {
  Writer w(SecAggType::kShareInbox, inbox.recipient, id, 4 + inbox.shares.size() * kSealedEntry);
  w.u32(static_cast<uint32_t>(inbox.shares.size()));
  for (const SealedShare& s : inbox.shares) {
    w.u32(s.sender);
    w.raw(s.box.data(), s.box.size());
  }
  return w.take();
}

std::optional<ShareInbox> decode_share_inbox(std::span<const uint8_t> bytes,
                                             const RoundId& expected, std::string* why) {
  Reader r(bytes);
  WireHeader h;
  uint32_t count = 0;
  if (!open_message(&r, SecAggType::kShareInbox, expected, &h, why) ||
      !read_count(&r, "share inbox", kMaxClients - 1, kSealedEntry, 0, &count, why)) {
    return std::nullopt;
  }
  ShareInbox inbox;
  inbox.recipient = h.client;
  inbox.shares.resize(count);
  for (SealedShare& s : inbox.shares) {
    s.recipient = h.client;
    r.u32(&s.sender);
    r.raw(s.box.data(), s.box.size());
  }
  if (!at_end(r, "share inbox", why)) return std::nullopt;
  return inbox;
}

Bytes encode_masked_input(const MaskedInput& input, const RoundId& id) {
  Writer w(SecAggType::kMaskedInput, input.client, id, 4 + 4 * input.masked.size());
  w.u32(static_cast<uint32_t>(input.masked.size()));
  for (const uint32_t v : input.masked) w.u32(v);
  return w.take();
}

std::optional<MaskedInput> decode_masked_input(std::span<const uint8_t> bytes,
                                               const RoundId& expected, int64_t length,
                                               std::string* why) {
  Reader r(bytes);
  WireHeader h;
  uint32_t count = 0;
  if (length < 1 || length > kMaxValues) {
    return refused<MaskedInput>(why, fmt::format("masked input: a round length of {}", length));
  }
  if (!open_message(&r, SecAggType::kMaskedInput, expected, &h, why) ||
      !read_count(&r, "masked input", static_cast<uint32_t>(length), 4, 0, &count, why)) {
    return std::nullopt;
  }
  if (count != length) {
    return refused<MaskedInput>(
        why, fmt::format("masked input: {} values (the round's updates have {})", count, length));
  }
  MaskedInput input;
  input.client = h.client;
  input.masked.resize(count);
  for (uint32_t& v : input.masked) r.u32(&v);
  if (!at_end(r, "masked input", why)) return std::nullopt;
  return input;
}

Bytes encode_unmask_request(const UnmaskRequest& request, const RoundId& id) {
  Writer w(SecAggType::kUnmaskRequest, 0, id,
           8 + 4 * (request.survivors.size() + request.dropped.size()));
  w.u32(static_cast<uint32_t>(request.survivors.size()));
  for (const uint32_t c : request.survivors) w.u32(c);
  w.u32(static_cast<uint32_t>(request.dropped.size()));
  for (const uint32_t c : request.dropped) w.u32(c);
  return w.take();
}

std::optional<UnmaskRequest> decode_unmask_request(std::span<const uint8_t> bytes,
                                                   const RoundId& expected, std::string* why) {
  Reader r(bytes);
  WireHeader h;
  uint32_t count = 0;
  if (!open_message(&r, SecAggType::kUnmaskRequest, expected, &h, why) ||
      !client_zero(h, "unmask request", why) ||
      !read_count(&r, "unmask request survivors", kMaxClients, 4, 4, &count, why)) {
    return std::nullopt;
  }
  UnmaskRequest request;
  request.survivors.resize(count);
  for (uint32_t& c : request.survivors) r.u32(&c);
  if (!read_count(&r, "unmask request dropped", kMaxClients, 4, 0, &count, why)) {
    return std::nullopt;
  }
  request.dropped.resize(count);
  for (uint32_t& c : request.dropped) r.u32(&c);
  if (!at_end(r, "unmask request", why)) return std::nullopt;
  return request;
}

Bytes encode_unmask_reply(const UnmaskReply& reply, const RoundId& id) {
  Writer w(SecAggType::kUnmaskReply, reply.client, id,
           8 + kRevealedEntry * (reply.seed_shares.size() + reply.key_shares.size()));
  for (const auto* list : {&reply.seed_shares, &reply.key_shares}) {
    w.u32(static_cast<uint32_t>(list->size()));
    for (const RevealedShare& s : *list) {
      w.u32(s.owner);
      w.raw(s.share.data(), s.share.size());
    }
  }
  return w.take();
}

std::optional<UnmaskReply> decode_unmask_reply(std::span<const uint8_t> bytes,
                                               const RoundId& expected, std::string* why) {
  Reader r(bytes);
  WireHeader h;
  if (!open_message(&r, SecAggType::kUnmaskReply, expected, &h, why)) return std::nullopt;
  UnmaskReply reply;
  reply.client = h.client;
  const char* names[] = {"unmask reply seed shares", "unmask reply key shares"};
  std::vector<RevealedShare>* lists[] = {&reply.seed_shares, &reply.key_shares};
  for (int l = 0; l < 2; ++l) {
    uint32_t count = 0;
    if (!read_count(&r, names[l], kMaxClients, kRevealedEntry, l == 0 ? 4 : 0, &count, why)) {
      return std::nullopt;
    }
    lists[l]->resize(count);
    for (RevealedShare& s : *lists[l]) {
      r.u32(&s.owner);
      r.raw(s.share.data(), s.share.size());
    }
  }
  if (!at_end(r, "unmask reply", why)) return std::nullopt;
  return reply;
}

}  // namespace brigade::secagg
