// brigade keygen: a long-term CURVE key pair for a federated coordinator or client
// (comm/key_file.h): NAME.key (secret, 0600) and NAME.pub (public). The public key is printed so
// that it can be sent to whoever keeps the allow-list; the secret one never is.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "brigade/cli/commands.h"
#include "brigade/comm/key_file.h"

namespace brigade::cli {

Command add_keygen(CLI::App& app) {
  auto stem = std::make_shared<std::string>();
  auto* sub = app.add_subcommand(
      "keygen", "create a key pair for a federated coordinator or client (NAME.key, NAME.pub)");
  sub->add_option("--out", *stem, "NAME: writes NAME.key (secret, mode 0600) and NAME.pub")
      ->required();
  return [stem]() {
    const std::string public_key = write_new_key_pair(*stem);
    std::printf("%s\n", fmt::format("wrote {0}.key (secret, 0600) and {0}.pub: public key {1}",
                                    *stem, public_key)
                            .c_str());
    return 0;
  };
}

}  // namespace brigade::cli
