#include "brigade/cli/version.h"

#include <fmt/format.h>
#include <gloo/config.h>
#include <google/protobuf/stubs/common.h>

#include <algorithm>

#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/runtime/run_folder.h"

namespace brigade::cli {

std::string version_text() {
  std::string out =
      fmt::format("brigade 0.1.0 (commit {}, {} build)\n", source_git_commit(), BRIGADE_BUILD_TYPE);
  for (GemmBackend b : {GemmBackend::kOneDnn, GemmBackend::kOpenBlas}) {
    out += "  " + gemm_backend_description(b) + "\n";  // each with its library's version
  }
  out += fmt::format("  Gloo {}.{}.{}, protobuf {}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                     GLOO_VERSION_PATCH,
                     google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION));
  return out;
}

namespace {

// Levenshtein distance, two rows.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string nearest_name(std::string_view typed, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = 3;  // at most 2 edits
  for (const std::string& n : names) {
    const size_t d = edit_distance(typed, n);
    if (d < best_d && d < typed.size()) best = n, best_d = d;
  }
  return best;
}

}  // namespace brigade::cli
