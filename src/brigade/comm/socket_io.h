#pragma once
// Small blocking-socket helpers with deadlines, for the TcpStore client and server.
// Every call is bounded: it polls in slices of at most 100 ms so a stop flag is noticed.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace brigade::detail {

using Clock = std::chrono::steady_clock;

enum class IoStatus { kOk, kClosed, kTimeout, kError, kStopped };
const char* io_status_text(IoStatus s);

// One connection attempt to host:port that finishes before `deadline`. Returns the connected
// descriptor (TCP_NODELAY, close-on-exec), or -1 with the reason in *error.
int tcp_connect_once(const std::string& host, int port, Clock::time_point deadline,
                     std::string* error);

// A listening socket on host:port (port 0: the kernel picks one). Returns -1 with the reason in
// *error on failure; *bound_port receives the actual port.
int tcp_listen(const std::string& host, int port, int* bound_port, std::string* error);

// Accepts one connection if one is pending within `wait`; returns -1 otherwise.
int tcp_accept(int listen_fd, std::chrono::milliseconds wait);

// Writes / reads exactly n bytes, or fails at the deadline, on EOF, on an error, or when *stop
// becomes true (stop may be null).
IoStatus write_all(int fd, const void* data, size_t n, Clock::time_point deadline,
                   const std::atomic<bool>* stop = nullptr);
IoStatus read_all(int fd, void* data, size_t n, Clock::time_point deadline,
                  const std::atomic<bool>* stop = nullptr);

// Reads one frame (u32 little-endian length, then the body) before `deadline`. Lengths above
// max_body are refused with kError before any allocation; the body is read as by
// read_frame_body, so a peer that announces a large frame and sends nothing costs no memory.
IoStatus read_frame(int fd, std::string* body, uint32_t max_body, Clock::time_point deadline,
                    const std::atomic<bool>* stop = nullptr);

// The two halves of read_frame, for a server that lets a connection idle between frames
// (header without a deadline) but not in the middle of one.
// Reads the u32 length; kError (nothing allocated) if it exceeds max_body.
IoStatus read_frame_header(int fd, uint32_t* len, uint32_t max_body, Clock::time_point deadline,
                           const std::atomic<bool>* stop = nullptr);
// Reads a body of `len` bytes into *body in chunks of kFrameChunkBytes: the buffer is grown
// only when the bytes already read fill it, so it never runs more than one chunk ahead of what
// the peer really sent. Fails at `deadline`, or when no byte arrived for `stall`.
inline constexpr size_t kFrameChunkBytes = 64 * 1024;
IoStatus read_frame_body(int fd, uint32_t len, std::string* body, Clock::time_point deadline,
                         Clock::duration stall, const std::atomic<bool>* stop = nullptr);
IoStatus write_frame(int fd, const std::string& body, Clock::time_point deadline,
                     const std::atomic<bool>* stop = nullptr);

// Builds a frame body: fixed-width little-endian integers and length-prefixed strings.
class FrameWriter {
 public:
  FrameWriter& u8(uint8_t v);
  FrameWriter& u32(uint32_t v);
  FrameWriter& i64(int64_t v);
  FrameWriter& str(const std::string& s);
  FrameWriter& bytes(const char* data, size_t n);
  const std::string& body() const { return body_; }

 private:
  std::string body_;
};

// Parses a frame body; every getter returns false (and reads nothing) if the body is too short
// or a string is longer than allowed, so malformed input from the network is rejected.
class FrameReader {
 public:
  explicit FrameReader(const std::string& body) : p_(body.data()), left_(body.size()) {}
  bool u8(uint8_t* v);
  bool u32(uint32_t* v);
  bool i64(int64_t* v);
  bool str(std::string* s, size_t max_len);
  bool at_end() const { return left_ == 0; }

 private:
  const char* p_;
  size_t left_;
};

}  // namespace brigade::detail
