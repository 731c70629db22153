// One libFuzzer entry point per fuzz target, compiled once per target with
// BRIGADE_FUZZ_TARGET="<name>": the same body as the bounded campaign (fuzz_target.h), so a
// defect here is a defect there. An exception that is not a brigade::Error (including the
// std::logic_error that run_case throws for an unbounded message or a silent loss) escapes and
// libFuzzer reports it as a crash, with the input saved. docs/fuzzing.md says how to run them.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz/fuzz_target.h"

#ifndef BRIGADE_FUZZ_TARGET
#error "compile with -DBRIGADE_FUZZ_TARGET=\"<target name>\""
#endif

namespace {

// Made once and never destroyed: a store server may hold parked connections at exit.
brigade::fuzz::Target& target() {
  static brigade::fuzz::Target* t = [] {
    const char* tmp = std::getenv("TMPDIR");
    const std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/brigade-libfuzzer-" +
                            BRIGADE_FUZZ_TARGET + "-" + std::to_string(::getpid());
    return brigade::fuzz::make_target(BRIGADE_FUZZ_TARGET, dir).release();
  }();
  return *t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  brigade::fuzz::run_case(target(), std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
