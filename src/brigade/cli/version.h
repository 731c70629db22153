#pragma once
// What `brigade --version` prints, and the hint for a mistyped subcommand.
#include <string>
#include <string_view>
#include <vector>

namespace brigade::cli {

// "brigade 0.1.0 (commit <sha>, Release build)", a line per GEMM backend with its library's
// version (oneDNN, OpenBLAS), and Gloo's and protobuf's versions.
std::string version_text();

// The name in `names` nearest to `typed` by edit distance, if it is at most 2 edits away (and
// fewer edits than typed has characters); "" otherwise.
std::string nearest_name(std::string_view typed, const std::vector<std::string>& names);

}  // namespace brigade::cli
