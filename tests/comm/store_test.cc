// Rendezvous stores within one process: FileStore and TcpStore semantics, bounded waits with
// clear errors, token checks, and a server that survives malformed clients.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "brigade/base/error.h"
#include "brigade/comm/file_store.h"
#include "brigade/comm/tcp_store.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::client_options;
using testutil::server_options;
using testutil::Clock;
using testutil::ms_since;

std::vector<char> bytes_of(const std::string& s) {
  return std::vector<char>(s.begin(), s.end());
}

// The same checks against any store.
void exercise_store(Store& store) {
  std::vector<char> binary = {'a', '\0', 'b', '\xff', '\n'};
  store.set("plain", binary);
  EXPECT_EQ(store.get("plain"), binary);
  store.set("plain", bytes_of("second"));
  EXPECT_EQ(store.get_string("plain"), "second");  // set replaces
  store.set("empty", {});
  EXPECT_TRUE(store.get("empty").empty());
  const std::string odd = "dp[0,2]/proc/3 with spaces%and/slashes";
  store.set_string(odd, "x");
  EXPECT_EQ(store.get_string(odd), "x");
  const std::string long_key(3000, 'k');
  store.set_string(long_key, "long");
  EXPECT_EQ(store.get_string(long_key), "long");
  EXPECT_TRUE(store.check({"plain", "empty", odd}));
  EXPECT_FALSE(store.check({"plain", "absent"}));
  store.wait({"plain", odd}, 100ms);  // present: returns at once
  EXPECT_EQ(store.add("counter", 5), 5);
  EXPECT_EQ(store.add("counter", -2), 3);
  EXPECT_EQ(store.get_string("counter"), "3");

  PrefixStore a("groupA", std::shared_ptr<Store>(&store, [](Store*) {}));
  PrefixStore b("groupB", std::shared_ptr<Store>(&store, [](Store*) {}));
  a.set_string("k", "from a");
  b.set_string("k", "from b");
  EXPECT_EQ(a.get_string("k"), "from a");
  EXPECT_EQ(b.get_string("k"), "from b");
  EXPECT_FALSE(store.check({"k"}));
  EXPECT_TRUE(store.check({"groupA/k"}));
}

void expect_wait_times_out(Store& store, std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  try {
    store.wait({"never-set", "plain"}, timeout);
    FAIL() << "wait returned for a key nobody sets";
  } catch (const CommError& e) {
    const int64_t elapsed = ms_since(start);
    EXPECT_EQ(e.kind(), CommError::Kind::kTimeout);
    EXPECT_GE(elapsed, timeout.count() - 5);
    EXPECT_LT(elapsed, timeout.count() + 1000);
    std::string msg = e.what();
    EXPECT_NE(msg.find("never-set"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("plain"), std::string::npos) << "only missing keys are named: " << msg;
  }
}

TEST(FileStoreTest, SetGetCheckAddPrefix) {
  testutil::TempDir dir;
  FileStore store(dir.path(), 2s);
  exercise_store(store);
  expect_wait_times_out(store, 300ms);
}

TEST(FileStoreTest, WaitSeesValueWrittenByAnotherStoreObject) {
  testutil::TempDir dir;
  FileStore reader(dir.path(), 2s), writer(dir.path(), 2s);
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    writer.set_string("late", "value");
  });
  EXPECT_EQ(reader.get_string("late"), "value");
  t.join();
}

TEST(FileStoreTest, ConcurrentAddsAreAtomic) {
  testutil::TempDir dir;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      FileStore s(dir.path(), 2s);
      for (int i = 0; i < 50; ++i) s.add("n", 1);
    });
  }
  for (auto& t : threads) t.join();
  FileStore s(dir.path(), 2s);
  EXPECT_EQ(s.get_string("n"), "200");
}

TEST(FileStoreTest, GetTimesOutWithTheStoreTimeout) {
  testutil::TempDir dir;
  FileStore store(dir.path(), 200ms);
  const auto start = Clock::now();
  EXPECT_THROW(store.get("absent"), CommError);
  EXPECT_LT(ms_since(start), 1200);
}

TEST(TcpStoreTest, SetGetCheckAddPrefix) {
  TcpStore server(server_options("tok"));
  exercise_store(server);
  expect_wait_times_out(server, 300ms);
  TcpStore client(client_options(server.port(), "tok"));
  EXPECT_EQ(client.get_string("plain"), "second");  // both see one key space
}

TEST(TcpStoreTest, WaitIsWokenBySetFromAnotherClient) {
  TcpStore server(server_options());
  TcpStore a(client_options(server.port())), b(client_options(server.port()));
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    b.set_string("late", "v");
  });
  const auto start = Clock::now();
  a.wait({"late"}, 2s);
  EXPECT_LT(ms_since(start), 1000);
  EXPECT_EQ(a.get_string("late"), "v");
  t.join();
}

TEST(TcpStoreTest, WrongOrMissingTokenIsRefused) {
  TcpStore server(server_options("right-token"));
  for (const std::string bad : {"wrong-token", "", "right-token-but-longer"}) {
    try {
      TcpStore client(client_options(server.port(), bad));
      FAIL() << "client with token '" << bad << "' was accepted";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("token"), std::string::npos) << e.what();
    }
  }
  TcpStore good(client_options(server.port(), "right-token"));
  good.set_string("k", "v");
  EXPECT_EQ(good.get_string("k"), "v");
}

TEST(TcpStoreTest, UnreachableStoreFailsWithinTimeoutNamingAddress) {
  const int port = testutil::pick_free_port();  // nobody listens there
  TcpStoreOptions o = client_options(port);
  o.timeout = 1s;
  o.rank = 3;
  const auto start = Clock::now();
  try {
    TcpStore client(o);
    FAIL() << "connected to a port nobody listens on";
  } catch (const CommError& e) {
    EXPECT_EQ(e.kind(), CommError::Kind::kTimeout);
    const std::string expected =
        "rank 3: could not reach store at 127.0.0.1:" + std::to_string(port) + " within 1 s";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  const int64_t elapsed = ms_since(start);
  EXPECT_GE(elapsed, 700);
  EXPECT_LT(elapsed, 2500);
}

// A raw connection that sends `bytes` and reports whether the server closed it within 3 s.
bool server_closes_after(int port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return false;
  }
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[256];
  bool closed = false;
  for (;;) {
    ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) {
      closed = true;
      break;
    }
    if (r < 0) break;  // timed out: still open
  }
  ::close(fd);
  return closed;
}

TEST(TcpStoreTest, MalformedClientsAreDisconnectedAndServerKeepsServing) {
  TcpStore server(server_options("tok"));
  // A length prefix of 4 GiB: refused before allocating.
  EXPECT_TRUE(server_closes_after(server.port(), std::string("\xff\xff\xff\xff", 4)));
  // A well-framed body that is not a hello.
  EXPECT_TRUE(server_closes_after(server.port(), std::string("\x03\x00\x00\x00\x02\x01\x00", 7)));
  // A hello whose token string claims more bytes than the frame holds.
  std::string lying = std::string("\x01") + std::string("\x0d\x00\x00\x00", 4) + "brigade-store" +
                      std::string("\x01\x00\x00\x00", 4) + std::string("\xff\x00\x00\x00", 4);
  std::string frame;
  for (int i = 0; i < 4; ++i) frame.push_back(static_cast<char>((lying.size() >> (8 * i)) & 0xff));
  EXPECT_TRUE(server_closes_after(server.port(), frame + lying));
  TcpStore good(client_options(server.port(), "tok"));
  good.set_string("still", "alive");
  EXPECT_EQ(good.get_string("still"), "alive");
}

}  // namespace
}  // namespace brigade
