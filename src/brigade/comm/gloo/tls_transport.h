#pragma once
// Gloo's TCP transport with every pair of ranks talking TLS 1.3 (OpenSSL), each side proving a
// pinned Ed25519 key (comm.transport = "tls", docs/security.md).
//
// Debian's libgloo is built without Gloo's own TLS transport, but its TCP pair keeps the hooks
// that transport uses: read(), write(), handleReadWrite(), changeState() and
// waitUntilConnected() are virtual. TlsPair overrides them the same way: after the TCP
// connection is made, the connecting side runs the TLS handshake in its own thread (holding the
// pair's lock, so the device loop stays off the socket) and the listening side runs it from the
// device loop as bytes arrive. Afterwards every frame Gloo writes (preamble and payload) goes
// through SSL_write and every read through SSL_read; a non-blocking write that cannot finish
// returns to Gloo's queue and is retried with the same bytes when the socket is writable.
//
// Identity: each rank presents a self-signed certificate made in memory from its Ed25519 key.
// Certificates are not checked against any authority; instead, once the handshake (which proves
// possession of the certificate's key) is done, each side compares the peer's key with the key
// that rank published in the job's store (gloo_connect.cc), and closes the pair with an error
// naming the rank when they differ. Session tickets are off, so no resumption state exists.
#include <gloo/transport/tcp/attr.h>

#include <memory>
#include <string>
#include <vector>

#include "brigade/comm/peer_identity.h"

namespace gloo::transport {
class Device;
}

namespace brigade::detail {

// A TCP device whose pairs speak TLS. peer_keys[r] is the raw Ed25519 public key rank r of the
// group must prove (the entry of this rank is not used). Throws CommError if OpenSSL cannot
// build the certificate or context.
std::shared_ptr<gloo::transport::Device> create_tls_device(const gloo::transport::tcp::attr& attr,
                                                           const PeerIdentity& identity,
                                                           std::vector<std::string> peer_keys);

}  // namespace brigade::detail
