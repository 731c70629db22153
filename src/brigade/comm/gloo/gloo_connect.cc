// Rendezvous of a Gloo group. Two phases, both bounded by CommOptions::timeout:
//  1. membership: each rank publishes "proc/<rank>" = "<hostname>\n<pid>" and waits for all
//     others' keys. A rank that never shows up is reported by number here, before Gloo starts;
//     the host/pid pairs later tell which peer died when an operation fails.
//     With it each rank publishes "transport/<rank>" = "tcp", or "tls <public key, hex>" under
//     CommOptions::security: every rank must speak the same, and a TLS key must be allowed.
//  2. transport: gloo::rendezvous::Context::connectFullMesh publishes this rank's listening
//     addresses under the same prefix and connects one TCP socket per pair of ranks (TLS on
//     it when asked: each side then proves the key it published, tls_transport.h).
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <optional>

#include "brigade/comm/comm_factory.h"
#include "brigade/comm/gloo/gloo_shared.h"
#include "brigade/comm/gloo/tls_transport.h"

namespace brigade::detail {

namespace {

using Clock = std::chrono::steady_clock;

std::string this_hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

std::string proc_key(int rank) {
  return "proc/" + std::to_string(rank);
}

std::string transport_key(int rank) {
  return "transport/" + std::to_string(rank);
}

std::string transport_record(const CommOptions& options) {
  return options.security ? "tls " + key_to_hex(options.security->identity.public_key) : "tcp";
}

// The key each rank must prove under TLS (empty entries under plain TCP), from the records all
// ranks published; CommError when a rank speaks another transport or holds a key not allowed.
std::vector<std::string> peer_keys_of(const GlooShared& s, const CommOptions& options, Store& store,
                                      const std::string& who) {
  std::vector<std::string> keys(s.size);
  const PeerSecurity* security = options.security.get();
  if (security) keys[s.rank] = security->identity.public_key;
  if (security && !security->allows(keys[s.rank])) {
    throw CommError(CommError::Kind::kOther,
                    who + ": this rank's own key (comm.key) is not in " + security->allowed_from);
  }
  for (int r = 0; r < s.size; ++r) {
    if (r == s.rank) continue;
    const std::string record = store.get_string(transport_key(r));
    const bool tls = record.rfind("tls ", 0) == 0;
    if (record != "tcp" && !tls) {
      throw CommError(CommError::Kind::kOther, who + ": malformed transport record of rank " +
                                                   std::to_string(r) + " in " + store.describe());
    }
    if (tls != (security != nullptr)) {
      throw CommError(CommError::Kind::kOther,
                      who + ": rank " + std::to_string(r) + " uses comm.transport = \"" +
                          (tls ? "tls" : "tcp") + "\" and this rank \"" +
                          (security ? "tls" : "tcp") + "\"; every rank must use the same");
    }
    if (!tls) continue;
    std::optional<std::string> key = key_from_hex(record.substr(4), kPeerKeyBytes);
    if (!key) {
      throw CommError(CommError::Kind::kOther, who + ": malformed TLS key of rank " +
                                                   std::to_string(r) + " in " + store.describe());
    }
    if (!security->allows(*key)) {
      throw CommError(CommError::Kind::kOther,
                      who + ": rank " + std::to_string(r) + " presents a key that is not in " +
                          security->allowed_from + "; refusing to connect to it");
    }
    keys[r] = *key;
  }
  return keys;
}

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g s", d.count() / 1000.0);
  return buf;
}

// Parses "<host>\n<pid>"; false if malformed.
bool parse_peer(const std::string& text, PeerInfo* out) {
  size_t nl = text.find('\n');
  if (nl == std::string::npos || nl == 0 || nl > 255) return false;
  std::string pid_text = text.substr(nl + 1);
  if (pid_text.empty() || pid_text.size() > 12) return false;
  for (char c : pid_text) {
    if (c < '0' || c > '9') return false;
  }
  out->host = text.substr(0, nl);
  out->pid = std::stoll(pid_text);
  return true;
}

// Gloo's TCP pairs write with writev, which raises SIGPIPE when the peer has gone: without
// this a survivor of a lost peer would be killed by the signal instead of getting EPIPE and a
// CommError naming the peer. (PyTorch relies on Python ignoring SIGPIPE.) A handler the
// program installed itself is left alone.
void ignore_sigpipe_unless_handled() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigemptyset(&ignore.sa_mask);
      ::sigaction(SIGPIPE, &ignore, nullptr);
    }
  });
}

}  // namespace

void gloo_connect(GlooShared& s, const CommOptions& options) {
  ignore_sigpipe_unless_handled();
  s.host = this_hostname();
  s.peers.assign(s.size, PeerInfo{});
  s.peers[s.rank] = PeerInfo{s.host, static_cast<int64_t>(::getpid())};
  if (s.size == 1) return;

  const std::string who = "group '" + s.name + "' (rank " + std::to_string(s.rank) + " of " +
                          std::to_string(s.size) + ")";
  auto store =
      std::make_shared<PrefixStore>("brigade/" + options.effective_prefix(), options.store);
  const auto start = Clock::now();
  auto elapsed = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  };

  // Phase 1: membership.
  std::vector<std::string> keys;
  for (int r = 0; r < s.size; ++r) {
    keys.push_back(proc_key(r));
    keys.push_back(transport_key(r));
  }
  try {
    store->set_string(transport_key(s.rank), transport_record(options));
    store->set_string(proc_key(s.rank), s.host + "\n" + std::to_string(::getpid()));
    store->wait(keys, options.timeout);
  } catch (const CommError& e) {
    if (e.kind() != CommError::Kind::kTimeout) {
      throw CommError(e.kind(), who + ": rendezvous failed: " + e.what());
    }
    std::string missing;
    int n_missing = 0;
    for (int r = 0; r < s.size; ++r) {
      if (r != s.rank && !store->check({proc_key(r), transport_key(r)})) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        ++n_missing;
      }
    }
    throw CommError(CommError::Kind::kTimeout, who + ": " + (n_missing == 1 ? "rank " : "ranks ") +
                                                   missing + " did not join within " +
                                                   seconds_text(options.timeout) + " (" +
                                                   store->describe() + ")");
  }
  for (int r = 0; r < s.size; ++r) {
    if (r == s.rank) continue;
    if (!parse_peer(store->get_string(proc_key(r)), &s.peers[r])) {
      throw CommError(CommError::Kind::kOther, who + ": malformed membership record of rank " +
                                                   std::to_string(r) + " in " + store->describe());
    }
  }

  const std::vector<std::string> peer_keys = peer_keys_of(s, options, *store, who);

  // Phase 2: transport.
  try {
    gloo::transport::tcp::attr attr;
    if (!options.iface.empty()) {
      attr.iface = options.iface;
    } else {
      attr.hostname = options.hostname;
    }
    s.device = options.security ? create_tls_device(attr, options.security->identity, peer_keys)
                                : gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(s.rank, s.size);
    context->setTimeout(options.timeout);
    context->connectFullMesh(*store, s.device);
    s.context = std::move(context);
  } catch (...) {
    std::string cause;
    CommError::Kind kind = classify_error(std::current_exception(), &cause);
    std::vector<int> dead = dead_peers(s);
    std::string dead_text;
    for (int r : dead) dead_text += "; rank " + std::to_string(r) + " is no longer running";
    if (!dead.empty()) kind = CommError::Kind::kPeerLost;
    throw CommError(kind, who + ": connecting to peers (" + (options.security ? "TLS" : "TCP") +
                              " transport bound to " +
                              (options.iface.empty() ? options.hostname : options.iface) +
                              ") failed after " + std::to_string(elapsed().count()) + " ms" +
                              dead_text + " [" + cause + "]");
  }
}

}  // namespace brigade::detail
