// brigade keygen: a long-term key pair (comm/key_file.h): NAME.key (secret, 0600) and NAME.pub
// (public). --kind curve (the default) for a federated coordinator or client, --kind tls for a
// peer whose collectives run over TLS (comm.transport = "tls"). The public key is printed so that
// it can be sent to whoever keeps the allow-list; the secret one never is.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "brigade/cli/commands.h"
#include "brigade/comm/key_file.h"

namespace brigade::cli {

Command add_keygen(CLI::App& app) {
  auto stem = std::make_shared<std::string>();
  auto kind = std::make_shared<std::string>("curve");
  auto* sub = app.add_subcommand(
      "keygen", "create a key pair for a federated coordinator or client, or a TLS peer");
  sub->add_option("--out", *stem, "NAME: writes NAME.key (secret, mode 0600) and NAME.pub")
      ->required();
  sub->add_option("--kind", *kind,
                  "curve: a federated coordinator or client (fed.*_key); tls: a peer of "
                  "collectives over TLS (comm.key)")
      ->check(CLI::IsMember({"curve", "tls"}))
      ->option_text("curve|tls (default curve)");
  return [stem, kind]() {
    const KeyKind k = *kind == "tls" ? KeyKind::kTls : KeyKind::kCurve;
    const std::string public_key = write_new_key_pair(*stem, k);
    std::printf("%s\n",
                fmt::format("wrote {0}.key (secret, 0600) and {0}.pub ({1}): public key {2}", *stem,
                            key_kind_name(k), public_key)
                    .c_str());
    return 0;
  };
}

}  // namespace brigade::cli
