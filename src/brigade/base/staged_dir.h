#pragma once
// A folder that appears complete or not at all: its content is written into a sibling
// `<target>.tmp` and renamed to `<target>` by commit(), so a run killed mid-way leaves no
// half-written target (only the staging folder, which the next StagedDir for that target
// removes). The same recipe as a checkpoint's step_N.tmp (docs/checkpoints.md).
#include <string>

namespace brigade {

class StagedDir {
 public:
  // Refuses an existing target unless replace (ConfigError naming it: nothing was written),
  // removes a stale staging folder and creates an empty one. IoError if that fails.
  StagedDir(const std::string& target, bool replace);
  // Without commit() (an error unwinds), removes the staging folder again.
  ~StagedDir();
  StagedDir(const StagedDir&) = delete;
  StagedDir& operator=(const StagedDir&) = delete;

  // Where to write: the staging folder (files in it are fsynced by their writers).
  const std::string& staging() const { return staging_; }
  const std::string& target() const { return target_; }

  // fsyncs every folder under staging() and staging() itself, then puts it in the target's
  // place and fsyncs the parent. With replace, an existing target is first renamed to
  // `<target>.old` and removed after the rename, so a kill in between leaves either the old
  // folder or the new one under a name of its own, never a mixture.
  void commit();

 private:
  std::string target_, staging_, parent_;
  bool replace_ = false;
  bool committed_ = false;
};

}  // namespace brigade
