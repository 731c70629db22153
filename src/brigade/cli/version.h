#pragma once
// What `brigade --version` prints.
#include <string>
#include <string_view>
#include <vector>

namespace brigade::cli {

// "brigade 0.1.0 (commit <sha>, Release build)", a line per GEMM backend with its library's
// version (oneDNN, OpenBLAS), and Gloo's and protobuf's versions.
std::string version_text();

}  // namespace brigade::cli
