#pragma once
// Expands what a user names as input data (data.path, `brigade tokenize --input`) into the files
// to read: a regular file, a folder (its regular files, recursively, skipping names that start
// with "."), or a glob pattern (glob(3): *, ?, [...]; every match must be a regular file).
//
// The result is sorted by path (bytewise), so it does not depend on the file system's listing
// order, and holds at most kMaxInputFiles entries: data sets of millions of shards are named
// by an index instead (data/shard_index.h).
#include <cstdint>
#include <string>
#include <vector>

namespace brigade {

inline constexpr int64_t kMaxInputFiles = 100000;

// IoError naming spec when it matches nothing, names a folder without regular files, lists more
// than kMaxInputFiles files, or a match cannot be examined.
std::vector<std::string> expand_input_files(const std::string& spec);

// Whether spec holds a glob metacharacter (*, ? or [).
bool is_glob_pattern(const std::string& spec);

}  // namespace brigade
