#include "brigade/data/input_files.h"

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "brigade/base/error.h"

namespace brigade {

namespace fs = std::filesystem;

namespace {

void add_file(std::vector<std::string>& files, std::string path, const std::string& spec) {
  if (static_cast<int64_t>(files.size()) >= kMaxInputFiles) {
    throw IoError(fmt::format("{}: more than {} files; name a smaller set", spec, kMaxInputFiles));
  }
  files.push_back(std::move(path));
}

std::vector<std::string> folder_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) add_file(files, it->path().string(), dir);
  }
  if (ec) throw IoError(fmt::format("{}: cannot list folder: {}", dir, ec.message()));
  if (files.empty()) throw IoError(fmt::format("{}: the folder holds no files", dir));
  return files;
}

// glob(3) reports a folder it cannot read through a plain function pointer: the first one is
// kept here (glob runs on the calling thread).
thread_local std::string glob_failed_path;
thread_local int glob_failed_errno = 0;

int note_glob_error(const char* path, int error) {
  if (glob_failed_path.empty()) {
    glob_failed_path = path;
    glob_failed_errno = error;
  }
  return 0;  // go on; a missing folder on the way simply matches nothing
}

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_failed_path.clear();
  glob_t matches{};
  const int rc = ::glob(pattern.c_str(), 0, note_glob_error, &matches);
  std::vector<std::string> files;
  // A folder that exists but cannot be read would silently drop its files: refused.
  if (!glob_failed_path.empty() && glob_failed_errno != ENOENT && glob_failed_errno != ENOTDIR) {
    ::globfree(&matches);
    throw IoError(fmt::format("{}: cannot read {}: {}", pattern, glob_failed_path,
                              std::strerror(glob_failed_errno)));
  }
  if (rc == GLOB_NOMATCH) {
    ::globfree(&matches);
    throw IoError(fmt::format("{}: no file matches the pattern", pattern));
  }
  if (rc != 0) {
    ::globfree(&matches);
    throw IoError(fmt::format("{}: cannot expand the pattern", pattern));
  }
  try {
    for (size_t i = 0; i < matches.gl_pathc; ++i) {
      const std::string path = matches.gl_pathv[i];
      std::error_code ec;
      if (!fs::is_regular_file(path, ec)) {
        throw IoError(fmt::format("{}: matches {}, which is not a regular file", pattern, path));
      }
      add_file(files, path, pattern);
    }
  } catch (...) {
    ::globfree(&matches);
    throw;
  }
  ::globfree(&matches);
  return files;
}

}  // namespace

bool is_glob_pattern(const std::string& spec) {
  return spec.find_first_of("*?[") != std::string::npos;
}

std::vector<std::string> expand_input_files(const std::string& spec) {
  if (spec.empty()) throw IoError("an empty path names no input file");
  std::vector<std::string> files;
  std::error_code ec;
  const fs::file_status status = fs::status(spec, ec);
  if (fs::is_regular_file(status)) {
    files.push_back(spec);
  } else if (fs::is_directory(status)) {
    files = folder_files(spec);
  } else if (is_glob_pattern(spec)) {
    files = glob_files(spec);
  } else if (fs::exists(status)) {
    throw IoError(fmt::format("{}: not a regular file or a folder", spec));
  } else {
    throw IoError(fmt::format("{}: no such file or folder", spec));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace brigade
