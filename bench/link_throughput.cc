// Throughput and round-trip time of one TCP path, for checking an emulated slow link
// (scripts/wan/, docs/slow-links.md). No iperf or netcat is needed: run the server in one
// network namespace and the client in another.
//
//   bench_link_throughput serve --bind IP --port P [--timeout S]
//   bench_link_throughput send --host IP --port P [--bytes N] [--pings K] [--timeout S]
//
// Protocol (one connection): the client sends a 16-byte hello (magic u32, pings u32, bytes
// u64, little-endian); then K one-byte pings, each echoed by the server (the client times each
// round trip); then N bytes of payload; the server answers with 8 bytes, the nanoseconds from
// its first to its last payload byte. The client prints one line of key=value pairs:
//   bytes=N seconds=S throughput_MBps=X receiver_MBps=Y rtt_us_median=R rtt_us_min=Q
// throughput_MBps (1 MB = 1e6 bytes) is measured at the sender from the first payload byte to
// the server's answer; receiver_MBps on the server's clock. Exit 0 on success, 1 on any
// failure (named on stderr), 2 for bad arguments. Every wait is bounded by --timeout (30 s).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kMagic = 0x4b4e494c;  // "LINK"
constexpr uint64_t kMaxBytes = uint64_t{1} << 36;
constexpr uint32_t kMaxPings = 100000;

struct Args {
  std::string mode, host = "127.0.0.1";
  int port = 0;
  uint64_t bytes = 16'000'000;
  uint32_t pings = 20;
  double timeout_s = 30;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_link_throughput: %s%s%s\n", what.c_str(), errno ? ": " : "",
               errno ? std::strerror(errno) : "");
  std::exit(1);
}

[[noreturn]] void usage(const std::string& what) {
  std::fprintf(stderr,
               "bench_link_throughput: %s\nusage: bench_link_throughput serve --bind IP --port P "
               "[--timeout S]\n       bench_link_throughput send --host IP --port P [--bytes N] "
               "[--pings K] [--timeout S]\n",
               what.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) usage("missing mode");
  a.mode = argv[1];
  if (a.mode != "serve" && a.mode != "send") usage("unknown mode '" + a.mode + "'");
  for (int i = 2; i < argc; ++i) {
    std::string key = argv[i];
    if (i + 1 >= argc) usage(key + " needs a value");
    std::string value = argv[++i];
    char* end = nullptr;
    errno = 0;
    if (key == "--bind" || key == "--host") {
      a.host = value;
    } else if (key == "--port") {
      long p = std::strtol(value.c_str(), &end, 10);
      if (*end || p < 1 || p > 65535) usage("--port must be 1..65535, got '" + value + "'");
      a.port = static_cast<int>(p);
    } else if (key == "--bytes") {
      unsigned long long b = std::strtoull(value.c_str(), &end, 10);
      if (*end || errno || b < 1 || b > kMaxBytes) usage("--bytes must be 1..2^36");
      a.bytes = b;
    } else if (key == "--pings") {
      unsigned long k = std::strtoul(value.c_str(), &end, 10);
      if (*end || errno || k > kMaxPings) usage("--pings must be 0..100000");
      a.pings = static_cast<uint32_t>(k);
    } else if (key == "--timeout") {
      double t = std::strtod(value.c_str(), &end);
      if (*end || !(t > 0 && t <= 3600)) usage("--timeout must be in (0, 3600] seconds");
      a.timeout_s = t;
    } else {
      usage("unknown option " + key);
    }
  }
  if (a.port == 0) usage("--port is required");
  return a;
}

sockaddr_in address(const Args& a) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(a.port));
  if (inet_pton(AF_INET, a.host.c_str(), &addr.sin_addr) != 1) {
    usage("not an IPv4 address: '" + a.host + "'");
  }
  return addr;
}

// Bounds every blocking read and write on fd.
void set_io_timeout(int fd, double seconds) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - static_cast<double>(tv.tv_sec)) * 1e6);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void write_all(int fd, const void* data, size_t n, const char* what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(std::string("write failed (") + what + ")");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void read_all(int fd, void* data, size_t n, const char* what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) errno = 0;
    if (r <= 0) fail(std::string("read failed (") + what + ")");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void put_u64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

int serve(const Args& a) {
  sockaddr_in addr = address(a);
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) fail("socket");
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    fail("cannot bind " + a.host + ":" + std::to_string(a.port));
  }
  if (::listen(listener, 1) != 0) fail("listen");
  pollfd pfd{listener, POLLIN, 0};
  int ready = ::poll(&pfd, 1, static_cast<int>(a.timeout_s * 1000));
  if (ready <= 0) {
    errno = 0;
    fail("no client within the timeout");
  }
  int fd = ::accept(listener, nullptr, nullptr);
  if (fd < 0) fail("accept");
  ::close(listener);
  set_io_timeout(fd, a.timeout_s);
  char hello[16];
  read_all(fd, hello, sizeof(hello), "hello");
  const uint32_t pings = get_u32(hello + 4);
  const uint64_t bytes = get_u64(hello + 8);
  if (get_u32(hello) != kMagic || pings > kMaxPings || bytes < 1 || bytes > kMaxBytes) {
    errno = 0;
    fail("malformed hello");
  }
  for (uint32_t i = 0; i < pings; ++i) {
    char c;
    read_all(fd, &c, 1, "ping");
    write_all(fd, &c, 1, "pong");
  }
  std::vector<char> buf(1 << 16);
  uint64_t left = bytes;
  Clock::time_point first{};
  bool started = false;
  while (left > 0) {
    ssize_t r = ::recv(fd, buf.data(), std::min<uint64_t>(left, buf.size()), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) errno = 0;
    if (r <= 0) fail("read failed (payload)");
    if (!started) {
      first = Clock::now();
      started = true;
    }
    left -= static_cast<uint64_t>(r);
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - first);
  char answer[8];
  put_u64(answer, static_cast<uint64_t>(ns.count()));
  write_all(fd, answer, sizeof(answer), "answer");
  ::close(fd);
  return 0;
}

int send_mode(const Args& a) {
  sockaddr_in addr = address(a);
  // The server may still be starting: retry until the deadline.
  const auto deadline = Clock::now() + std::chrono::duration<double>(a.timeout_s);
  int fd = -1;
  while (true) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) fail("socket");
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) break;
    ::close(fd);
    if (Clock::now() >= deadline)
      fail("cannot connect to " + a.host + ":" + std::to_string(a.port));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  set_io_timeout(fd, a.timeout_s);
  char hello[16];
  put_u32(hello, kMagic);
  put_u32(hello + 4, a.pings);
  put_u64(hello + 8, a.bytes);
  write_all(fd, hello, sizeof(hello), "hello");
  std::vector<double> rtt_us;
  for (uint32_t i = 0; i < a.pings; ++i) {
    char c = 'p';
    const auto t0 = Clock::now();
    write_all(fd, &c, 1, "ping");
    read_all(fd, &c, 1, "pong");
    rtt_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::vector<char> buf(1 << 16, 'x');
  const auto t0 = Clock::now();
  for (uint64_t left = a.bytes; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    write_all(fd, buf.data(), n, "payload");
    left -= n;
  }
  char answer[8];
  read_all(fd, answer, sizeof(answer), "answer");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double receiver_s = static_cast<double>(get_u64(answer)) * 1e-9;
  ::close(fd);
  std::sort(rtt_us.begin(), rtt_us.end());
  const double median = rtt_us.empty() ? 0 : rtt_us[rtt_us.size() / 2];
  const double min = rtt_us.empty() ? 0 : rtt_us.front();
  const double b = static_cast<double>(a.bytes);
  std::printf(
      "bytes=%llu seconds=%.4f throughput_MBps=%.3f receiver_MBps=%.3f rtt_us_median=%.1f "
      "rtt_us_min=%.1f\n",
      static_cast<unsigned long long>(a.bytes), seconds, b / seconds / 1e6,
      receiver_s > 0 ? b / receiver_s / 1e6 : 0.0, median, min);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  return a.mode == "serve" ? serve(a) : send_mode(a);
}
