#include "brigade/runtime/host_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "brigade/base/error.h"

namespace brigade {

HostPort parse_host_port(const std::string& text, const std::string& option) {
  auto fail = [&](const std::string& why) -> ConfigError {
    return ConfigError(option + " '" + text + "': " + why + " (expected HOST:PORT)");
  };
  HostPort hp;
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) throw fail("unclosed '['");
    hp.host = text.substr(1, close - 1);
    std::string rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') throw fail("unexpected text after ']'");
      port_text = rest.substr(1);
      if (port_text.empty()) throw fail("empty port");
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') != colon) {
      throw fail("an IPv6 address must be written in brackets, e.g. [::1]:29500");
    }
    hp.host = text.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = text.substr(colon + 1);
      if (port_text.empty()) throw fail("empty port");
    }
  }
  if (hp.host.empty()) throw fail("empty host");
  if (!port_text.empty()) {
    if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos) {
      throw fail("port is not an integer in [1, 65535]");
    }
    hp.port = std::stoi(port_text);
    if (hp.port < 1 || hp.port > 65535) throw fail("port is not an integer in [1, 65535]");
  }
  return hp;
}

int pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw IoError(std::string("socket() for a free port: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw IoError(std::string("binding 127.0.0.1:0 for a free port: ") + std::strerror(err));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace brigade
