#pragma once
// Whole-file reads and crash-safe writes for the data pipeline's small artifacts (tokenizer
// merges, token shards). Both throw IoError naming the path.
#include <string>
#include <string_view>

namespace brigade::detail {

// Reads the whole file. IoError naming the path when it is missing or unreadable.
std::string read_file(const std::string& path);

// Writes bytes to path + ".tmp.<pid>", flushes and fsyncs it, then renames it over path, so a
// reader sees the old file or the complete new one, never a torn write.
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace brigade::detail
