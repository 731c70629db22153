// CheckpointReader: validate a checkpoint folder against its manifest, find the newest valid
// one under a root, and read tensors out of it.
#include <sys/stat.h>

#include <mutex>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/ckpt/checkpoint.h"
#include "brigade/ckpt/checkpoint_validation.h"

namespace brigade {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

}  // namespace

struct CheckpointReader::Cache {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files;
};

CheckpointReader::CheckpointReader(std::string dir, Manifest manifest)
    : dir_(std::move(dir)), manifest_(std::move(manifest)), cache_(std::make_unique<Cache>()) {}
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;
CheckpointReader::~CheckpointReader() = default;

CheckpointReader CheckpointReader::open(const std::string& dir_in) {
  const std::string dir = strip_trailing_slashes(dir_in);
  Manifest m = load_manifest(dir);
  for (const auto& [name, expected] : m.files) verify_checkpoint_file(dir, name, expected);
  return CheckpointReader(dir, std::move(m));
}

std::optional<CheckpointReader> CheckpointReader::open_latest_valid(
    const std::string& root_in, std::vector<std::string>* rejections) {
  const std::string root = strip_trailing_slashes(root_in);
  auto reject = [&](const std::string& what) { report_rejected_checkpoint(what, rejections); };
  for (const std::string& name : checkpoint_candidates(root, reject)) {
    try {
      return open(root + "/" + name);
    } catch (const Error& e) {
      reject(e.what());
    }
  }
  return std::nullopt;
}

const SafetensorsFile& CheckpointReader::file(const std::string& filename) const {
  if (!manifest_.files.count(filename)) {
    throw CheckpointError(dir_ + ": file '" + filename + "' is not in the manifest");
  }
  std::lock_guard<std::mutex> lock(cache_->mu);
  auto& slot = cache_->files[filename];
  if (!slot) {
    try {
      slot = std::make_unique<SafetensorsFile>(SafetensorsFile::open(dir_ + "/" + filename));
    } catch (const IoError& e) {
      cache_->files.erase(filename);
      throw CheckpointError(e.what());
    }
  }
  return *slot;
}

std::optional<std::string> CheckpointReader::find_tensor(const std::string& name) const {
  for (const auto& [filename, digest] : manifest_.files) {
    if (filename.ends_with(".safetensors") && file(filename).contains(name)) return filename;
  }
  return std::nullopt;
}

void CheckpointReader::read(const std::string& filename, const std::string& name, float* out,
                            const std::vector<int64_t>& shape) const {
  const SafetensorsFile& f = file(filename);
  if (!f.contains(name)) throw CheckpointError(f.path() + ": no tensor '" + name + "'");
  const StTensorInfo& info = f.info(name);
  if (info.shape != shape) {
    throw CheckpointError(f.path() + ": tensor '" + name + "' has shape " + shape_str(info.shape) +
                          ", expected " + shape_str(shape));
  }
  f.read_f32(name, out, info.numel());
}

std::string resolve_checkpoint_dir(std::string path) {
  auto is_dir = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  };
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (!is_dir(path)) throw IoError("checkpoint not found: " + path);
  if (is_dir(path + "/checkpoints")) {  // a run folder
    if (auto reader = CheckpointReader::open_latest_valid(path + "/checkpoints")) {
      return reader->dir();
    }
  } else if (parse_step_dir_name(path.substr(path.find_last_of('/') + 1))) {
    return path;  // one checkpoint: opening it verifies its checksums
  } else if (auto reader = CheckpointReader::open_latest_valid(path)) {
    return reader->dir();  // a checkpoints root
  }
  throw CheckpointError("no valid checkpoint in " + path);
}

}  // namespace brigade
