#include "brigade/cli/version.h"

#include <fmt/format.h>
#include <gloo/config.h>
#include <google/protobuf/stubs/common.h>

#include <algorithm>

#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/kernels/cpu/kernel_isa.h"
#include "brigade/runtime/run_folder.h"

namespace brigade::cli {

std::string version_text() {
  std::string out =
      fmt::format("brigade 0.1.0 (commit {}, {} build)\n", source_git_commit(), BRIGADE_BUILD_TYPE);
  for (GemmBackend b : {GemmBackend::kOneDnn, GemmBackend::kOpenBlas}) {
    out += "  " + gemm_backend_description(b) + "\n";  // each with its library's version
  }
  out += "  " + elementwise_isa_description() + "\n";  // the ISA this CPU runs them on
  out += fmt::format("  Gloo {}.{}.{}, protobuf {}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                     GLOO_VERSION_PATCH,
                     google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION));
  return out;
}

}  // namespace brigade::cli
