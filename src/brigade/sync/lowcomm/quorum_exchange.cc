#include "brigade/sync/lowcomm/quorum_exchange.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/sync/lowcomm/payload.h"

namespace brigade {

namespace {
// The members value that tells every replica the coordinator gave up on this step.
constexpr const char* kNoQuorum = "!";
// How often the coordinator looks for missing payloads once the first wait ran out.
constexpr std::chrono::milliseconds kPoll{5};

std::string payload_key(const std::string& key, int rank) {
  return key + "/p" + std::to_string(rank);
}
}  // namespace

std::string format_members(const std::vector<int>& members) {
  std::string s;
  for (int r : members) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

std::vector<int> parse_members(const std::string& text, int world) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(at, comma - at);
    int64_t r = -1;
    if (item.empty() || item.size() > 6 || !detail::parse_int64(item, &r) || r < 0 || r >= world ||
        (!out.empty() && r <= out.back())) {
      throw PayloadError(
          fmt::format("members list \"{}\": want distinct ascending ranks in [0, {})",
                      text.substr(0, 64), world));
    }
    out.push_back(static_cast<int>(r));
    at = comma + 1;
  }
  return out;
}

int quorum_required(double quorum, int world) {
  return std::max(1, static_cast<int>(std::ceil(quorum * world - 1e-9)));
}

QuorumExchange::QuorumExchange(std::shared_ptr<Store> store, int world, int rank,
                               QuorumOptions options, std::function<void(const std::string&)> log)
    : store_(std::move(store)),
      world_(world),
      rank_(rank),
      options_(options),
      required_(quorum_required(options.quorum, world)),
      log_(std::move(log)) {
  BRIGADE_CHECK(store_ && world >= 1 && rank >= 0 && rank < world)
      << "world " << world << " rank " << rank;
  BRIGADE_CHECK(options.quorum > 0 && options.quorum <= 1 && options.deadline.count() > 0 &&
                options.retries >= 0)
      << "quorum " << options.quorum << " deadline " << options.deadline.count() << " retries "
      << options.retries;
}

std::vector<int> QuorumExchange::decide(const std::string& key, const std::string& what) {
  std::vector<std::string> all;
  for (int r = 0; r < world_; ++r) all.push_back(payload_key(key, r));
  std::vector<int> present;
  auto look = [&] {
    present.clear();
    for (int r = 0; r < world_; ++r) {
      if (r == rank_ || store_->check({all[r]})) present.push_back(r);
    }
    return static_cast<int>(present.size());
  };
  for (int attempt = 0; attempt <= options_.retries; ++attempt) {
    const auto until = std::chrono::steady_clock::now() + options_.deadline;
    while (look() < world_ && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(kPoll);
    }
    if (static_cast<int>(present.size()) == world_) break;
    if (static_cast<int>(present.size()) >= required_) break;
    if (attempt < options_.retries && log_) {
      log_(
          fmt::format("{}: only ranks [{}] reported within {} ms, {} of {} required; waiting "
                      "again (retry {} of {})",
                      what, format_members(present), options_.deadline.count(), required_, world_,
                      attempt + 1, options_.retries));
    }
  }
  if (static_cast<int>(present.size()) < required_) {
    store_->set_string(key + "/members", kNoQuorum);
    throw CommError(CommError::Kind::kTimeout,
                    fmt::format("{}: quorum not reached: only ranks [{}] of {} reported within "
                                "{} x {} ms, sync.quorum = {} requires {}; stopping",
                                what, format_members(present), world_, options_.retries + 1,
                                options_.deadline.count(), options_.quorum, required_));
  }
  store_->set_string(key + "/members", format_members(present));
  if (static_cast<int>(present.size()) < world_ && log_) {
    std::vector<int> out;
    for (int r = 0, i = 0; r < world_; ++r) {
      if (i < static_cast<int>(present.size()) && present[i] == r) {
        ++i;
      } else {
        out.push_back(r);
      }
    }
    log_(
        fmt::format("{}: left out rank(s) [{}] (no payload within the deadline); averaging "
                    "ranks [{}]",
                    what, format_members(out), format_members(present)));
  }
  return present;
}

std::vector<int> QuorumExchange::exchange(const std::string& key, const std::string& what,
                                          const uint8_t* payload, int64_t bytes,
                                          std::vector<uint8_t>& gathered) {
  store_->set(payload_key(key, rank_),
              std::vector<char>(reinterpret_cast<const char*>(payload),
                                reinterpret_cast<const char*>(payload) + bytes));
  std::vector<int> members;
  if (rank_ == 0) {
    members = decide(key, what);
  } else {
    const std::string text = store_->get_string(key + "/members");
    if (text == kNoQuorum) {
      throw CommError(CommError::Kind::kTimeout,
                      fmt::format("{}: the coordinator (rank 0) found no quorum (sync.quorum = "
                                  "{}); stopping",
                                  what, options_.quorum));
    }
    members = parse_members(text, world_);
  }
  if (static_cast<int64_t>(gathered.size()) < static_cast<int64_t>(members.size()) * bytes) {
    gathered.resize(members.size() * bytes);
  }
  bool in = false;
  for (size_t i = 0; i < members.size(); ++i) {
    uint8_t* dst = gathered.data() + i * bytes;
    if (members[i] == rank_) {
      in = true;
      std::memcpy(dst, payload, bytes);
      continue;
    }
    const std::vector<char> v = store_->get(payload_key(key, members[i]));
    if (static_cast<int64_t>(v.size()) != bytes) {
      throw PayloadError(fmt::format("{}: rank {} posted {} bytes, expected {}", what, members[i],
                                     v.size(), bytes));
    }
    std::memcpy(dst, v.data(), bytes);
  }
  if (!in && log_) {
    log_(
        fmt::format("{}: this replica was left out (members [{}]); rejoining from their "
                    "theta_global",
                    what, format_members(members)));
  }
  return members;
}

}  // namespace brigade
