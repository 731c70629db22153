#include "brigade/base/staged_dir.h"

#include <filesystem>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"

namespace brigade {

namespace {

namespace fs = std::filesystem;

// "out/" and "out" name the same target; its siblings are built from the name without the slash.
std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string parent_of(const std::string& path) {
  const std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? std::string(".") : parent;
}

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() != fs::file_type::not_found;
}

}  // namespace

StagedDir::StagedDir(const std::string& target, bool replace)
    : target_(without_trailing_slashes(target)),
      staging_(target_ + ".tmp"),
      parent_(parent_of(target_)),
      replace_(replace) {
  if (!replace_ && exists(target_)) {
    throw ConfigError(target_ + " already exists, and replacing it was not asked for");
  }
  make_dirs(parent_);
  remove_all(staging_);
  make_dirs(staging_);
}

StagedDir::~StagedDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);  // best effort: we are unwinding from another error
}

void StagedDir::commit() {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(staging_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec)) fsync_dir(it->path().string());
  }
  if (ec) throw IoError("cannot list " + staging_ + ": " + ec.message());
  fsync_dir(staging_);
  const std::string old = target_ + ".old";
  const bool had_target = exists(target_);
  if (had_target) {
    if (!replace_)
      throw ConfigError(target_ + " appeared while it was being written; not replaced");
    remove_all(old);
    rename_atomic(target_, old);
  }
  rename_atomic(staging_, target_);
  committed_ = true;
  fsync_dir(parent_);
  if (had_target) remove_all(old);
}

}  // namespace brigade
