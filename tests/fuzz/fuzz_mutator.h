#pragma once
// A small deterministic mutator for the bounded fuzz campaign (tests/fuzz/*_fault_test.cc).
//
// Case i of a class is mutate(seeds, case_seed(base, class, i)): a pure function of its inputs,
// so a failing case is reproduced from the three numbers the test prints, on any machine.
// Mutations are the ones that found the defects of issue 13 and the classic ones of AFL:
// bit flips, interesting byte and integer values (little- and big-endian), byte insertion and
// deletion, duplication, truncation, splicing two seeds, deep nesting of '[' / '{', huge and
// non-finite numbers, and TOML / JSON tokens in the middle of the text.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace brigade::fuzz {

// SplitMix64: tiny, fast, and fully specified, so sequences are the same everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n > 0.
  uint64_t below(uint64_t n) { return next() % n; }
  bool one_in(uint64_t n) { return below(n) == 0; }

 private:
  uint64_t state_;
};

// The seed of case `index` of class `name` in a campaign started from `base`.
uint64_t case_seed(uint64_t base, std::string_view name, uint64_t index);

struct MutatorOptions {
  size_t max_size = 1 << 20;  // mutated inputs are cut to this many bytes (deep nesting excepted)
  int max_stacked = 4;        // mutations applied on top of each other, 1..max_stacked
  int max_nesting = 100'000;  // deepest '[' / '{' run inserted
};

// One mutated input: picks a seed from `seeds` and applies 1..max_stacked mutations.
std::string mutate(std::span<const std::string> seeds, uint64_t case_seed,
                   const MutatorOptions& options = {});

}  // namespace brigade::fuzz
