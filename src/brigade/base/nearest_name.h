#pragma once
// "Did you mean ...?" for a mistyped name (a subcommand, a config key): the nearest known name
// by edit distance.
#include <string>
#include <string_view>
#include <vector>

namespace brigade {

// Levenshtein distance between a and b (insertions, deletions, substitutions).
size_t edit_distance(std::string_view a, std::string_view b);

// The name in `names` nearest to `typed` by edit distance, if it is at most max_edits away (and
// fewer edits than typed has characters); "" otherwise. The first of equally near names wins.
std::string nearest_name(std::string_view typed, const std::vector<std::string>& names,
                         size_t max_edits = 2);

}  // namespace brigade
