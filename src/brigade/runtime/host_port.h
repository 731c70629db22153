#pragma once
// Rendezvous endpoints: parsing HOST[:PORT] from the command line and picking a free port.
#include <string>

namespace brigade {

struct HostPort {
  std::string host;
  int port = 0;  // 0: none given
};

// Parses "HOST:PORT", "HOST" (port 0) or "[IPV6]:PORT". Throws ConfigError naming `option`
// and the text when the host is empty or the port is not an integer in [1, 65535].
HostPort parse_host_port(const std::string& text, const std::string& option);

// A TCP port that was free on 127.0.0.1 a moment ago: binds port 0, reads the port the
// kernel chose, closes the socket. Another process may take the port between this call and
// the master's bind (a small race that torchrun accepts too); the kernel hands out ephemeral
// ports round-robin, so an immediate reuse is unlikely. Throws IoError if no socket can be bound.
int pick_free_port();

}  // namespace brigade
