#include "brigade/base/nearest_name.h"

#include <algorithm>

namespace brigade {

size_t edit_distance(std::string_view a, std::string_view b) {
  // Two rows of the dynamic programme.
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

std::string nearest_name(std::string_view typed, const std::vector<std::string>& names,
                         size_t max_edits) {
  std::string best;
  size_t best_d = max_edits + 1;
  for (const std::string& n : names) {
    const size_t d = edit_distance(typed, n);
    if (d < best_d && d < typed.size()) best = n, best_d = d;
  }
  return best;
}

}  // namespace brigade
