#pragma once
// Wall-clock time as it is written in logs and metrics: UTC, ISO 8601 with milliseconds
// ("2026-12-01T21:50:03.127Z"), which sorts as text and which every tool parses.
#include <chrono>
#include <string>

namespace brigade {

std::string utc_iso8601(std::chrono::system_clock::time_point t);
inline std::string utc_now_iso8601() {
  return utc_iso8601(std::chrono::system_clock::now());
}

}  // namespace brigade
