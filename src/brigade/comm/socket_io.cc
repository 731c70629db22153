#include "brigade/comm/socket_io.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace brigade::detail {

namespace {

constexpr auto kSlice = std::chrono::milliseconds(100);

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, kSlice.count()));
}

bool stopped(const std::atomic<bool>* stop) {
  return stop && stop->load();
}

// Waits until fd is ready for `events`; kOk when ready.
IoStatus wait_ready(int fd, short events, Clock::time_point deadline,
                    const std::atomic<bool>* stop) {
  for (;;) {
    if (stopped(stop)) return IoStatus::kStopped;
    if (Clock::now() >= deadline) return IoStatus::kTimeout;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc < 0) {
      if (errno == EINTR) continue;
      return IoStatus::kError;
    }
    if (rc > 0) return IoStatus::kOk;  // readiness or error: the read/write call tells which
  }
}

}  // namespace

const char* io_status_text(IoStatus s) {
  switch (s) {
    case IoStatus::kOk:
      return "ok";
    case IoStatus::kClosed:
      return "connection closed";
    case IoStatus::kTimeout:
      return "timed out";
    case IoStatus::kError:
      return "I/O error";
    case IoStatus::kStopped:
      return "stopped";
  }
  return "?";
}

int tcp_connect_once(const std::string& host, int port, Clock::time_point deadline,
                     std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  int gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (gai != 0) {
    *error = std::string("cannot resolve host: ") + ::gai_strerror(gai);
    return -1;
  }
  int result = -1;
  for (addrinfo* ai = res; ai != nullptr && result < 0; ai = ai->ai_next) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      *error = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      // Bounded connect: a silently dropped SYN must not block past the deadline.
      pollfd p{fd, POLLOUT, 0};
      int left = static_cast<int>(std::max<int64_t>(
          0,
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
      rc = ::poll(&p, 1, left);
      if (rc == 1) {
        int so_error = 0;
        socklen_t len = sizeof(so_error);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        rc = so_error == 0 ? 0 : -1;
        errno = so_error;
      } else {
        rc = -1;
        errno = ETIMEDOUT;
      }
    }
    if (rc != 0) {
      *error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    result = fd;
  }
  ::freeaddrinfo(res);
  return result;
}

int tcp_listen(const std::string& host, int port, int* bound_port, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (gai != 0) {
    *error = std::string("cannot resolve host: ") + ::gai_strerror(gai);
    return -1;
  }
  int result = -1;
  for (addrinfo* ai = res; ai != nullptr && result < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      *error = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      *error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    if (addr.ss_family == AF_INET) {
      *bound_port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    } else {
      *bound_port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    }
    result = fd;
  }
  ::freeaddrinfo(res);
  return result;
}

int tcp_accept(int listen_fd, std::chrono::milliseconds wait) {
  pollfd p{listen_fd, POLLIN, 0};
  int rc = ::poll(&p, 1, static_cast<int>(wait.count()));
  if (rc <= 0) return -1;
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

IoStatus write_all(int fd, const void* data, size_t n, Clock::time_point deadline,
                   const std::atomic<bool>* stop) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    IoStatus s = wait_ready(fd, POLLOUT, deadline, stop);
    if (s != IoStatus::kOk) return s;
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return errno == EPIPE || errno == ECONNRESET ? IoStatus::kClosed : IoStatus::kError;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return IoStatus::kOk;
}

namespace {

// Reads at least one and at most n bytes; *got says how many.
IoStatus read_some(int fd, char* data, size_t n, size_t* got, Clock::time_point deadline,
                   const std::atomic<bool>* stop) {
  for (;;) {
    IoStatus s = wait_ready(fd, POLLIN, deadline, stop);
    if (s != IoStatus::kOk) return s;
    ssize_t r = ::recv(fd, data, n, MSG_DONTWAIT);
    if (r == 0) return IoStatus::kClosed;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return errno == ECONNRESET ? IoStatus::kClosed : IoStatus::kError;
    }
    *got = static_cast<size_t>(r);
    return IoStatus::kOk;
  }
}

}  // namespace

IoStatus read_all(int fd, void* data, size_t n, Clock::time_point deadline,
                  const std::atomic<bool>* stop) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    size_t got = 0;
    IoStatus s = read_some(fd, p, n, &got, deadline, stop);
    if (s != IoStatus::kOk) return s;
    p += got;
    n -= got;
  }
  return IoStatus::kOk;
}

IoStatus read_frame_header(int fd, uint32_t* len, uint32_t max_body, Clock::time_point deadline,
                           const std::atomic<bool>* stop) {
  unsigned char len_bytes[4];
  IoStatus s = read_all(fd, len_bytes, 4, deadline, stop);
  if (s != IoStatus::kOk) return s;
  *len = uint32_t{len_bytes[0]} | (uint32_t{len_bytes[1]} << 8) | (uint32_t{len_bytes[2]} << 16) |
         (uint32_t{len_bytes[3]} << 24);
  return *len > max_body ? IoStatus::kError : IoStatus::kOk;
}

IoStatus read_frame_body(int fd, uint32_t len, std::string* body, Clock::time_point deadline,
                         Clock::duration stall, const std::atomic<bool>* stop) {
  body->clear();
  size_t got = 0;
  while (got < len) {
    // Grow by one chunk only once the bytes read so far fill the buffer: the length prefix
    // alone is a claim, not a reason to allocate.
    if (body->size() == got) body->resize(got + std::min<size_t>(kFrameChunkBytes, len - got));
    // (stall may be Clock::duration::max(): add it only when it ends before the deadline.)
    const auto now = Clock::now();
    const auto chunk_deadline = stall < deadline - now ? now + stall : deadline;
    size_t n = 0;
    IoStatus s = read_some(fd, body->data() + got, body->size() - got, &n, chunk_deadline, stop);
    if (s != IoStatus::kOk) {
      body->clear();
      return s;
    }
    got += n;
  }
  return IoStatus::kOk;
}

IoStatus read_frame(int fd, std::string* body, uint32_t max_body, Clock::time_point deadline,
                    const std::atomic<bool>* stop) {
  uint32_t len = 0;
  IoStatus s = read_frame_header(fd, &len, max_body, deadline, stop);
  if (s != IoStatus::kOk) return s;
  return read_frame_body(fd, len, body, deadline, Clock::duration::max(), stop);
}

IoStatus write_frame(int fd, const std::string& body, Clock::time_point deadline,
                     const std::atomic<bool>* stop) {
  std::string frame;
  frame.reserve(body.size() + 4);
  uint32_t len = static_cast<uint32_t>(body.size());
  for (int i = 0; i < 4; ++i) frame.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  frame += body;
  return write_all(fd, frame.data(), frame.size(), deadline, stop);
}

FrameWriter& FrameWriter::u8(uint8_t v) {
  body_.push_back(static_cast<char>(v));
  return *this;
}
FrameWriter& FrameWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) body_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return *this;
}
FrameWriter& FrameWriter::i64(int64_t v) {
  uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) body_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  return *this;
}
FrameWriter& FrameWriter::str(const std::string& s) {
  return bytes(s.data(), s.size());
}
FrameWriter& FrameWriter::bytes(const char* data, size_t n) {
  u32(static_cast<uint32_t>(n));
  body_.append(data, n);
  return *this;
}

bool FrameReader::u8(uint8_t* v) {
  if (left_ < 1) return false;
  *v = static_cast<uint8_t>(p_[0]);
  p_ += 1;
  left_ -= 1;
  return true;
}
bool FrameReader::u32(uint32_t* v) {
  if (left_ < 4) return false;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= uint32_t{static_cast<uint8_t>(p_[i])} << (8 * i);
  *v = r;
  p_ += 4;
  left_ -= 4;
  return true;
}
bool FrameReader::i64(int64_t* v) {
  if (left_ < 8) return false;
  uint64_t r = 0;
  for (int i = 0; i < 8; ++i) r |= uint64_t{static_cast<uint8_t>(p_[i])} << (8 * i);
  *v = static_cast<int64_t>(r);
  p_ += 8;
  left_ -= 8;
  return true;
}
bool FrameReader::str(std::string* s, size_t max_len) {
  const char* save_p = p_;
  size_t save_left = left_;
  uint32_t len = 0;
  if (!u32(&len) || len > max_len || len > left_) {
    p_ = save_p;
    left_ = save_left;
    return false;
  }
  s->assign(p_, len);
  p_ += len;
  left_ -= len;
  return true;
}

}  // namespace brigade::detail
