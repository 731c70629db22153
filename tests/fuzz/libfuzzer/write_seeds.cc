// Writes the seed corpus of every fuzz target (valid files made by the project's writers) into
// <dir>/<target>/seed-<k>, the starting corpus of the libFuzzer targets:
//   brigade_fuzz_seeds corpus && fuzz_config corpus/config
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz/fuzz_target.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const std::string scratch = "/tmp/brigade-fuzz-seeds-" + std::to_string(::getpid());
  for (const std::string& name : brigade::fuzz::target_names()) {
    auto target = brigade::fuzz::make_target(name, scratch + "/" + name);
    const auto seeds = target->seeds();
    std::filesystem::create_directories(root + "/" + name);
    for (size_t k = 0; k < seeds.size(); ++k) {
      brigade::fuzz::write_scratch(root + "/" + name + "/seed-" + std::to_string(k), seeds[k]);
    }
    std::printf("%-20s %zu seed(s) in %s/%s\n", name.c_str(), seeds.size(), root.c_str(),
                name.c_str());
  }
  std::filesystem::remove_all(scratch);
  // A store server may still hold connections: leave without destructors.
  std::fflush(stdout);
  ::_exit(0);
}
