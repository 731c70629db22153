// The parameter servers' ZeroMQ sockets over loopback: a worker whose CURVE key is on the
// allow-list reaches the server, which learns the worker's index from the handshake (not from
// the message); a peer with another key, or with no encryption at all, never delivers a byte
// and the refusal is logged; a message over the size bound drops the connection.
#include "brigade/comm/curve_socket.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace brigade {
namespace {

using std::chrono::milliseconds;

zmq::multipart_t hello(const std::string& text) {
  zmq::multipart_t m;
  m.addstr(text);
  return m;
}

class CurveSocket : public ::testing::Test {
 protected:
  CurveSocket()
      : server_keys_(CurveKeyPair::generate()),
        alice_(CurveKeyPair::generate()),
        bob_(CurveKeyPair::generate()),
        socket_(server_keys_, {{alice_.public_key, 0}, {bob_.public_key, 1}}, "127.0.0.1", 1024,
                "a test server", "test.bind", [this](const std::string& line) {
                  std::lock_guard<std::mutex> lock(mu_);
                  log_.push_back(line);
                }) {}

  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

  CurveKeyPair server_keys_, alice_, bob_;
  std::mutex mu_;
  std::vector<std::string> log_;
  CurveServerSocket socket_;
};

TEST_F(CurveSocket, AllowedWorkersAreKnownByTheirKey) {
  EXPECT_EQ(socket_.endpoint().rfind("tcp://127.0.0.1:", 0), 0u) << socket_.endpoint();
  CurveClientLink a(alice_, server_keys_.public_key, socket_.endpoint());
  CurveClientLink b(bob_, server_keys_.public_key, socket_.endpoint());
  b.send(hello("from b"));
  a.send(hello("from a"));
  std::vector<std::pair<int, std::string>> got;
  for (int i = 0; i < 2; ++i) {
    auto r = socket_.receive(milliseconds(5000));
    ASSERT_TRUE(r);
    got.emplace_back(r->peer, r->frames[0].to_string());
    socket_.send(r->identity, hello("reply to " + std::to_string(r->peer)));
  }
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::pair<int, std::string>>{{0, "from a"}, {1, "from b"}}));
  auto ra = a.receive(milliseconds(5000));
  ASSERT_TRUE(ra);
  EXPECT_EQ((*ra)[0].to_string(), "reply to 0");
  EXPECT_TRUE(log().empty());
}

TEST_F(CurveSocket, StrangersAreRefusedAndLogged) {
  const CurveKeyPair mallory = CurveKeyPair::generate();
  CurveClientLink m(mallory, server_keys_.public_key, socket_.endpoint());
  m.send(hello("let me in"));
  // A plain-text peer: no CURVE handshake at all.
  zmq::context_t context;
  zmq::socket_t plain(context, zmq::socket_type::dealer);
  plain.set(zmq::sockopt::linger, 0);
  plain.connect(socket_.endpoint());
  plain.send(zmq::str_buffer("plain"), zmq::send_flags::dontwait);
  EXPECT_FALSE(socket_.receive(milliseconds(1500))) << "a stranger's message was delivered";
  bool logged = false;
  for (const std::string& line : log()) {
    logged |= line.find("refused a connection from 127.0.0.1") != std::string::npos;
    EXPECT_EQ(line.find(mallory.secret_key), std::string::npos);
  }
  EXPECT_TRUE(logged);
  // The allowed worker still gets through afterwards.
  CurveClientLink a(alice_, server_keys_.public_key, socket_.endpoint());
  a.send(hello("still here"));
  auto r = socket_.receive(milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->peer, 0);
}

TEST_F(CurveSocket, AWorkerWithTheWrongServerKeyNeverConnects) {
  const CurveKeyPair impostor = CurveKeyPair::generate();
  CurveClientLink a(alice_, impostor.public_key, socket_.endpoint());
  a.send(hello("to whom?"));
  EXPECT_FALSE(socket_.receive(milliseconds(1000)));
}

TEST_F(CurveSocket, OversizedMessagesAreDropped) {
  CurveClientLink a(alice_, server_keys_.public_key, socket_.endpoint());
  a.send(hello(std::string(4096, 'x')));  // over the 1024-byte bound
  EXPECT_FALSE(socket_.receive(milliseconds(1000)));
}

}  // namespace
}  // namespace brigade
