#include "brigade/data/file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "brigade/base/error.h"

namespace brigade::detail {

namespace {
std::string errno_text() {
  return std::strerror(errno);
}
}  // namespace

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw IoError(path + ": no such file");
  }
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw IoError(path + ": cannot open: " + errno_text());
  std::string out;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, got);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) throw IoError(path + ": read error");
  return out;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw IoError(path + ": cannot create " + tmp + ": " + errno_text());
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = ok && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const std::string why = ok ? "" : errno_text();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    throw IoError(path + ": write failed: " + why);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw IoError(path + ": cannot rename " + tmp + " into place: " + ec.message());
  }
}

}  // namespace brigade::detail
