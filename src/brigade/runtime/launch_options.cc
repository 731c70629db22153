// Checking `brigade launch` options, and making run ids and store tokens.
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>

#include "brigade/base/error.h"
#include "brigade/runtime/launcher.h"

namespace brigade {

void LaunchOptions::validate() const {
  auto fail = [](const std::string& option, const std::string& value, const std::string& allowed) {
    throw ConfigError(option + " " + value + ": " + allowed);
  };
  if (nproc < 1 || nproc > 1024) fail("--nproc", std::to_string(nproc), "must be in [1, 1024]");
  if (nnodes < 1 || nnodes > 65536)
    fail("--nnodes", std::to_string(nnodes), "must be in [1, 65536]");
  if (node_rank < 0 || node_rank >= nnodes) {
    fail("--node-rank", std::to_string(node_rank),
         "must be in [0, " + std::to_string(nnodes - 1) + "] (--nnodes " + std::to_string(nnodes) +
             ")");
  }
  if (master_addr.empty()) fail("--master", "''", "the host is empty");
  if (master_port < 0 || master_port > 65535) {
    fail("--master", master_addr + ":" + std::to_string(master_port), "port must be in [1, 65535]");
  }
  if (nnodes > 1 && master_port == 0) {
    fail("--master", master_addr,
         "HOST:PORT with an explicit port is required with --nnodes " + std::to_string(nnodes) +
             " (every node must name the same rendezvous)");
  }
  if (!std::isfinite(grace_s) || grace_s < 0 || grace_s > 3600) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", grace_s);
    fail("--grace", text, "must be in [0, 3600] seconds");
  }
  if (!run_id.empty()) {
    bool ok = run_id.size() <= 64;
    for (char c : run_id)
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
    if (!ok) fail("--run-id", "'" + run_id + "'", "must be 1-64 characters of A-Z a-z 0-9 . _ -");
  }
  if (max_restarts < 0 || max_restarts > 1000) {
    fail("--max-restarts", std::to_string(max_restarts), "must be in [0, 1000]");
  }
  if (min_nproc != 0 && (min_nproc < 1 || min_nproc > nproc)) {
    fail("--min-nproc", std::to_string(min_nproc),
         "must be in [1, " + std::to_string(nproc) + "] (--nproc " + std::to_string(nproc) + ")");
  }
  if (nnodes > 1 && (max_restarts > 0 || min_nproc_or_nproc() < nproc)) {
    fail(max_restarts > 0 ? "--max-restarts" : "--min-nproc",
         std::to_string(max_restarts > 0 ? max_restarts : min_nproc),
         "needs --nnodes 1: the agents of different nodes do not agree on restarts yet");
  }
  if (min_nproc_or_nproc() < nproc && max_restarts == 0) {
    fail("--min-nproc", std::to_string(min_nproc),
         "shrinks the group only when it restarts; give --max-restarts as well");
  }
  if (!std::isfinite(heartbeat_timeout_s) || heartbeat_timeout_s < 0 ||
      heartbeat_timeout_s > 86400 || (heartbeat_timeout_s > 0 && heartbeat_timeout_s < 0.1)) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", heartbeat_timeout_s);
    fail("--heartbeat-timeout", text, "must be 0 (off) or in [0.1, 86400] seconds");
  }
  // The token is checked for its size and presence only: it is a secret, never shown.
  if (store_token.size() > kMaxStoreTokenBytes) {
    fail("BRIGADE_STORE_TOKEN", "(" + std::to_string(store_token.size()) + " bytes)",
         "may have at most " + std::to_string(kMaxStoreTokenBytes) + " bytes");
  }
  if (nnodes > 1 && store_token.empty()) {
    fail("--nnodes", std::to_string(nnodes),
         "needs BRIGADE_STORE_TOKEN in the environment, the same on every node (e.g. export "
         "BRIGADE_STORE_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')): each node's "
         "launcher would otherwise make its own token and the nodes could not rendezvous");
  }
  if (args.empty() || args[0].empty()) {
    fail("worker command", "(none)",
         "give it after --, e.g. brigade launch --nproc 2 -- train cfg.toml");
  }
}

std::string make_run_id() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &utc);
  std::random_device random;  // /dev/urandom: distinct across launches started the same second
  char id[48];
  std::snprintf(id, sizeof(id), "%s-%08x", stamp, static_cast<unsigned>(random()));
  return id;
}

std::string make_store_token() {
  unsigned char bits[16];
  size_t got = 0;
  while (got < sizeof(bits)) {
    ssize_t n = ::getrandom(bits + got, sizeof(bits) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // ENOSYS (an old kernel, a seccomp filter): try the device
    }
  }
  if (got < sizeof(bits)) {
    int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    got = 0;
    while (fd >= 0 && got < sizeof(bits)) {
      ssize_t n = ::read(fd, bits + got, sizeof(bits) - got);
      if (n > 0) {
        got += static_cast<size_t>(n);
      } else if (!(n < 0 && errno == EINTR)) {
        break;
      }
    }
    const int err = errno;
    if (fd >= 0) ::close(fd);
    if (got < sizeof(bits)) {
      throw IoError(std::string("making a store token: neither getrandom() nor /dev/urandom "
                                "gave random bytes: ") +
                    std::strerror(err));
    }
  }
  static const char* kHex = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bits) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

}  // namespace brigade
