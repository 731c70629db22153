// Collectives over TLS between ranks (comm/gloo/tls_transport.h), across real processes:
//   - every collective and point-to-point transfer gives what plain TCP gives, up to 16 MB;
//   - a network tap between two ranks sees the payload in clear under TCP and never under TLS,
//     and one flipped byte silently changes what TCP delivers but fails the operation under TLS;
//   - a rank whose key is not on the allow-list, a rank that cannot prove the key it published,
//     and ranks that disagree on the transport are refused with messages naming the rank.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "brigade/base/error.h"
#include "brigade/comm/peer_identity.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

std::shared_ptr<const PeerSecurity> tls_with(PeerIdentity identity,
                                             std::vector<std::string> allowed = {}) {
  auto s = std::make_shared<PeerSecurity>();
  s->identity = std::move(identity);
  s->allowed = std::move(allowed);
  s->allowed_from = "comm.peer_public";
  return s;
}

CommOptions options_for(std::shared_ptr<Store> store, int rank, int size,
                        std::shared_ptr<const PeerSecurity> security,
                        const std::string& host = "127.0.0.1") {
  CommOptions o;
  o.rank = rank;
  o.size = size;
  o.timeout = 10s;
  o.store = std::move(store);
  o.hostname = host;
  o.security = std::move(security);
  return o;
}

// The CommError text of creating a communicator and running one barrier ("" when both work).
std::string failure_of(const CommOptions& o) {
  try {
    auto comm = create_communicator(o);
    comm->barrier();
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

void check_collectives(Communicator& comm) {
  const int N = comm.size(), r = comm.rank();
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 22}) {  // up to 16 MB per rank
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(r) + 0.5f * (i % 1024);
    comm.all_reduce(v.data(), n, ReduceOp::kSum);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = N * (N - 1) / 2.0f + N * 0.5f * (i % 1024);
      if (v[i] != want && bad++ < 3) ADD_FAILURE() << "all_reduce n " << n << " [" << i << "]";
    }
  }
  const int64_t per = 300000;
  std::vector<float> mine(per, static_cast<float>(r + 1)), all(per * N);
  comm.all_gather(mine.data(), all.data(), per);
  for (int p = 0; p < N; ++p) EXPECT_EQ(all[p * per + per - 1], p + 1.0f);
  std::vector<uint8_t> bytes(1 << 20, static_cast<uint8_t>(r == 0 ? 7 : 0));
  comm.broadcast_bytes(bytes.data(), static_cast<int64_t>(bytes.size()), 0);
  EXPECT_EQ(bytes.back(), 7);
  // A ring of point-to-point transfers: each rank sends to the next, receives from the last.
  std::vector<int32_t> out(250000, r), in(250000, -1);
  auto s = comm.send_async(out.data(), out.size() * 4, (r + 1) % N, 5);
  auto q = comm.recv_async(in.data(), in.size() * 4, (r + N - 1) % N, 5);
  s->wait();
  q->wait();
  EXPECT_EQ(in.front(), (r + N - 1) % N);
  EXPECT_EQ(in.back(), (r + N - 1) % N);
  comm.barrier();
}

TEST(TlsTransport, CollectivesGiveTheirClosedFormsOnTwoAndThreeRanks) {
  for (int world : {2, 3}) {
    testing::TempDir dir;
    auto result = testutil::run_ranks(world, 120s, [&](int rank) {
      auto store = std::make_shared<FileStore>(dir.path(), 10s);
      auto comm =
          create_communicator(options_for(store, rank, world, tls_with(PeerIdentity::generate())));
      check_collectives(*comm);
    });
    EXPECT_TRUE(testutil::AllRanksOk(result)) << "world " << world << ": " << result.describe();
  }
}

TEST(TlsTransport, AKeyNotOnTheAllowListIsRefusedByEveryRank) {
  testing::TempDir dir;
  const PeerIdentity listed = PeerIdentity::generate(), other = PeerIdentity::generate(),
                     stranger = PeerIdentity::generate();
  auto result = testutil::run_ranks(2, 60s, [&](int rank) {
    auto store = std::make_shared<FileStore>(dir.path(), 10s);
    const std::vector<std::string> allowed = {listed.public_key, other.public_key};
    const std::string error =
        failure_of(options_for(store, rank, 2, tls_with(rank == 0 ? listed : stranger, allowed)));
    if (rank == 0) {
      EXPECT_THAT(error, HasSubstr("rank 1 presents a key that is not in comm.peer_public"));
    } else {
      EXPECT_THAT(error, HasSubstr("this rank's own key (comm.key) is not in comm.peer_public"));
    }
    EXPECT_THAT(error, ::testing::Not(HasSubstr(key_to_hex(stranger.public_key))));
  });
  EXPECT_TRUE(testutil::AllRanksOk(result)) << result.describe();
}

// A store through which one rank reads another's records changed on the way: what a network
// attacker between the ranks could do to an unprotected rendezvous, or a holder of the token.
class TamperingStore : public Store {
 public:
  TamperingStore(std::shared_ptr<Store> base,
                 std::function<void(const std::string&, std::vector<char>*)> edit)
      : Store(base->timeout()), base_(std::move(base)), edit_(std::move(edit)) {}
  void set(const std::string& key, const std::vector<char>& value) override {
    base_->set(key, value);
  }
  std::vector<char> get(const std::string& key) override {
    std::vector<char> value = base_->get(key);
    edit_(key, &value);
    return value;
  }
  using Store::wait;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    base_->wait(keys, t);
  }
  bool check(const std::vector<std::string>& keys) override { return base_->check(keys); }
  int64_t add(const std::string& key, int64_t delta) override { return base_->add(key, delta); }
  std::string describe() const override { return base_->describe(); }

 private:
  std::shared_ptr<Store> base_;
  std::function<void(const std::string&, std::vector<char>*)> edit_;
};

TEST(TlsTransport, ARankThatCannotProveThePublishedKeyIsRefused) {
  testing::TempDir dir;
  const std::string impostor_key = key_to_hex(PeerIdentity::generate().public_key);
  auto result = testutil::run_ranks(2, 60s, [&](int rank) {
    std::shared_ptr<Store> store = std::make_shared<FileStore>(dir.path(), 10s);
    if (rank == 0) {  // rank 0 is told rank 1's key is one that rank 1 does not hold
      const std::string forged = "tls " + impostor_key;
      store = std::make_shared<TamperingStore>(
          store, [forged](const std::string& key, std::vector<char>* v) {
            if (key == "brigade/world/transport/1") v->assign(forged.begin(), forged.end());
          });
    }
    const std::string error =
        failure_of(options_for(store, rank, 2, tls_with(PeerIdentity::generate())));
    EXPECT_FALSE(error.empty()) << "rank " << rank << " connected";
    if (rank == 0) {
      EXPECT_THAT(error, HasSubstr("proved a key other than the one rank 1 published"));
    }
  });
  EXPECT_TRUE(testutil::AllRanksOk(result)) << result.describe();
}

TEST(TlsTransport, RanksThatDisagreeOnTheTransportAreRefused) {
  testing::TempDir dir;
  auto result = testutil::run_ranks(2, 60s, [&](int rank) {
    auto store = std::make_shared<FileStore>(dir.path(), 10s);
    const std::string error = failure_of(
        options_for(store, rank, 2, rank == 0 ? tls_with(PeerIdentity::generate()) : nullptr));
    EXPECT_THAT(error, HasSubstr("every rank must use the same")) << "rank " << rank;
  });
  EXPECT_TRUE(testutil::AllRanksOk(result)) << result.describe();
}

// A tap on the wire between rank 1 and rank 0: it listens on 127.0.0.2, forwards both ways to
// rank 0's real address, records every byte, and may flip one byte rank 1 sends. Rank 1 is
// pointed at it by rewriting rank 0's published address as rank 1 reads it. (Gloo lets the
// higher address connect: rank 1 binds 127.0.0.3, so it connects; rank 0, on 127.0.0.1, accepts.)
class WireTap {
 public:
  explicit WireTap(int64_t flip_at) : flip_at_(flip_at) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = 0;
    ::inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
    BRIGADE_CHECK(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    BRIGADE_CHECK(::listen(listen_fd_, 1) == 0);
    socklen_t len = sizeof(a);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    self_ = a;
  }
  ~WireTap() {
    if (thread_.joinable()) thread_.join();
    ::close(listen_fd_);
  }

  // Rewrites the first address in rank 0's published pair addresses to the tap's, keeping the
  // real one to forward to.
  void redirect(std::vector<char>* gloo_addresses) {
    std::memcpy(&target_, gloo_addresses->data(), sizeof(target_));
    std::memcpy(gloo_addresses->data(), &self_, sizeof(self_));
    thread_ = std::thread([this] { pump(); });
  }

  std::string seen() const { return seen_; }

 private:
  void pump() {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 20000) != 1) return;
    const int from_rank1 = ::accept(listen_fd_, nullptr, nullptr);
    const int to_rank0 = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(to_rank0, reinterpret_cast<sockaddr*>(&target_), sizeof(target_)) != 0) return;
    int64_t forwarded = 0;  // bytes from rank 1 so far
    pollfd fds[2] = {{from_rank1, POLLIN, 0}, {to_rank0, POLLIN, 0}};
    const auto end = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < end && ::poll(fds, 2, 1000) >= 0) {
      bool closed = false;
      for (int i = 0; i < 2; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[65536];
        const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          closed = true;
          break;
        }
        if (i == 0 && flip_at_ >= forwarded && flip_at_ < forwarded + n) {
          buf[flip_at_ - forwarded] ^= 0x20;
        }
        if (i == 0) forwarded += n;
        seen_.append(buf, n);
        for (ssize_t off = 0; off < n;) {
          const ssize_t w = ::write(fds[1 - i].fd, buf + off, n - off);
          if (w <= 0) break;
          off += w;
        }
      }
      if (closed) break;
    }
    ::close(from_rank1);
    ::close(to_rank0);
  }

  int64_t flip_at_;
  int listen_fd_ = -1;
  sockaddr_in self_{}, target_{};
  std::thread thread_;
  std::string seen_;
};

constexpr const char* kSecret = "a-line-of-private-training-data ";

TEST(TlsTransport, ATapReadsAndChangesTcpTrafficUnnoticedButNotTlsTraffic) {
  for (bool tls : {false, true}) {
    for (int64_t flip_at : {int64_t{-1}, int64_t{300000}}) {
      SCOPED_TRACE(std::string(tls ? "tls" : "tcp") +
                   (flip_at < 0 ? ", clean" : ", one byte flipped"));
      testing::TempDir dir;
      auto result = testutil::run_ranks(2, 60s, [&](int rank) {
        std::shared_ptr<Store> store = std::make_shared<FileStore>(dir.path(), 10s);
        std::unique_ptr<WireTap> tap;
        if (rank == 1) {
          tap = std::make_unique<WireTap>(flip_at);
          store = std::make_shared<TamperingStore>(
              store, [&](const std::string& key, std::vector<char>* v) {
                if (key == "brigade/world/0") tap->redirect(v);
              });
        }
        std::string payload;
        while (payload.size() < (1u << 20)) payload += kSecret;
        payload.resize(1 << 20);
        std::string received(payload.size(), '\0'), error;
        try {
          auto comm = create_communicator(
              options_for(store, rank, 2, tls ? tls_with(PeerIdentity::generate()) : nullptr,
                          rank == 0 ? "127.0.0.1" : "127.0.0.3"));
          if (rank == 1) {
            comm->send(payload.data(), static_cast<int64_t>(payload.size()), 0, 3);
          } else {
            comm->recv(received.data(), static_cast<int64_t>(received.size()), 1, 3);
          }
        } catch (const CommError& e) {
          error = e.what();
        }
        if (rank == 1) {
          const std::string seen = tap->seen();
          tap.reset();
          EXPECT_GT(static_cast<int64_t>(seen.size()),
                    flip_at < 0 ? static_cast<int64_t>(payload.size()) : flip_at)
              << "the tap forwarded the transfer";
          EXPECT_EQ(seen.find(kSecret) != std::string::npos, !tls) << "plaintext on the wire";
          return;
        }
        if (flip_at < 0) {
          EXPECT_EQ(error, "");
          EXPECT_TRUE(received == payload) << "the transfer arrived whole";
        } else if (!tls) {
          EXPECT_EQ(error, "") << "plain TCP cannot tell";
          EXPECT_FALSE(received == payload) << "the flipped byte arrived unnoticed";
        } else {
          EXPECT_THAT(error, HasSubstr("TLS read failed")) << "a tampered record fails";
        }
      });
      EXPECT_TRUE(testutil::AllRanksOk(result)) << result.describe();
    }
  }
}

}  // namespace
}  // namespace brigade
