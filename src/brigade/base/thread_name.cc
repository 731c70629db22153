#include "brigade/base/thread_name.h"

#include <pthread.h>

#include <string>

namespace brigade {

void name_this_thread(const char* name) {
  // Longer names are refused with ERANGE: cut them rather than leave the thread unnamed.
  const std::string cut = std::string(name).substr(0, 15);
  ::pthread_setname_np(::pthread_self(), cut.c_str());
}

}  // namespace brigade
