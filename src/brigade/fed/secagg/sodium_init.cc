#include "brigade/fed/secagg/sodium_init.h"

#include <sodium.h>

#include "brigade/fed/secagg/protocol.h"

namespace brigade::secagg {

bool sodium_ready(std::string* why) {
  static const bool ready = sodium_init() >= 0;
  return ready || detail::refuse(why, "libsodium could not be initialised");
}

}  // namespace brigade::secagg
