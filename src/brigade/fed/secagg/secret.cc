#include "brigade/fed/secagg/secret.h"

#include <sodium.h>

namespace brigade::secagg {

void wipe_bytes(void* data, size_t size) {
  if (size > 0) sodium_memzero(data, size);
}

}  // namespace brigade::secagg
