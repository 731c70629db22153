#pragma once
// libsodium must be initialised once per process before its random numbers are used.
#include <string>

namespace brigade::secagg {

// Initialises libsodium (once, thread-safe); false with *why when it cannot.
bool sodium_ready(std::string* why);

}  // namespace brigade::secagg
