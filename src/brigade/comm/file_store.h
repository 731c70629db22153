#pragma once
// FileStore: a rendezvous store in a directory every rank can see (a local temp dir for
// processes on one machine, or a shared file system such as NFS across machines).
//
// Each key is one file. set() writes a private temporary file and rename()s it into place, so
// a reader sees either no file or the whole value (rename is atomic on POSIX and NFS). Waits
// poll the directory (1 ms, doubling to 20 ms) because inotify does not work on shared file
// systems. add() serializes writers with flock() on a per-key lock file.
//
// We use our own store rather than gloo::rendezvous::FileStore because Gloo's get() ignores the
// configured timeout (fixed 30 s) and measures waits in whole seconds.
#include <string>

#include "brigade/comm/store.h"

namespace brigade {

class FileStore : public Store {
 public:
  // Creates `dir` (and parents) if missing; throws IoError naming the path on failure.
  explicit FileStore(std::string dir, std::chrono::milliseconds timeout = std::chrono::seconds(30));

  void set(const std::string& key, const std::vector<char>& value) override;
  std::vector<char> get(const std::string& key) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string describe() const override { return "file store " + dir_; }

  const std::string& dir() const { return dir_; }

 private:
  // File name for a key: safe characters kept, others %XX-escaped; long keys are hashed.
  std::string path_for(const std::string& key) const;
  void write_atomically(const std::string& path, const std::vector<char>& value);
  // Reads the whole file; false if it does not exist.
  bool read_file(const std::string& path, std::vector<char>* out) const;

  std::string dir_;
};

}  // namespace brigade
