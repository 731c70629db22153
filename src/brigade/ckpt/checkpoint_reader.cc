// CheckpointReader: validate a checkpoint folder against its manifest, find the newest valid
// one under a root, and read tensors out of it.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/ckpt/checkpoint.h"

namespace brigade {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kMaxManifestBytes = int64_t{64} << 20;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

std::string strip_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
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
  const std::string manifest_path = dir + "/" + kManifestFileName;
  std::string text;
  try {
    text = read_file(manifest_path, kMaxManifestBytes);
  } catch (const IoError& e) {
    throw CheckpointError(e.what());  // names the manifest path and errno text
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(manifest_path + ": not valid JSON: " + e.what());
  }
  Manifest m = Manifest::from_json(j, manifest_path);
  const auto folder_step = parse_step_dir_name(fs::path(dir).filename().string());
  if (folder_step && *folder_step != m.step) {
    throw CheckpointError(manifest_path + ": step " + std::to_string(m.step) +
                          " does not match the folder name");
  }

  for (const auto& [name, expected] : m.files) {
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      throw CheckpointError(path + ": listed in the manifest but " + std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) throw CheckpointError(path + ": not a regular file");
    if (st.st_size != expected.bytes) {
      throw CheckpointError(path + ": " + std::to_string(st.st_size) +
                            " bytes, the manifest says " + std::to_string(expected.bytes) +
                            " (truncated or overwritten)");
    }
    FileDigest actual;
    try {
      actual = digest_file(path);
    } catch (const IoError& e) {
      throw CheckpointError(e.what());
    }
    if (actual != expected) {
      throw CheckpointError(path + ": crc32 " + hex32(actual.crc32) + " over " +
                            std::to_string(actual.bytes) + " bytes, the manifest says " +
                            hex32(expected.crc32) + " over " + std::to_string(expected.bytes) +
                            " (corrupt)");
    }
  }
  return CheckpointReader(dir, std::move(m));
}

std::optional<CheckpointReader> CheckpointReader::open_latest_valid(
    const std::string& root_in, std::vector<std::string>* rejections) {
  const std::string root = strip_trailing_slashes(root_in);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return std::nullopt;

  auto reject = [&](const std::string& what) {
    const std::string line = "checkpoint rejected: " + what;
    std::fprintf(stderr, "[rank %d] warning: %s\n", detail::log_rank(), line.c_str());
    if (rejections) rejections->push_back(line);
  };
  std::set<std::string> tried;
  auto attempt = [&](const std::string& name) -> std::optional<CheckpointReader> {
    tried.insert(name);
    try {
      return open(root + "/" + name);
    } catch (const Error& e) {
      reject(e.what());
      return std::nullopt;
    }
  };

  const std::string latest = root + "/" + kLatestFileName;
  if (fs::exists(latest, ec)) {
    try {
      std::string name = read_file(latest, 4096);
      while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back())))
        name.pop_back();
      if (parse_step_dir_name(name)) {
        if (auto r = attempt(name)) return r;
      } else {
        reject(latest + ": does not name a checkpoint folder");
      }
    } catch (const IoError& e) {
      reject(e.what());
    }
  }

  std::vector<std::pair<int64_t, std::string>> candidates;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    const auto step = parse_step_dir_name(name);
    if (step && !tried.count(name)) candidates.emplace_back(*step, name);
  }
  if (ec) throw IoError("cannot list checkpoint folder " + root + ": " + ec.message());
  std::sort(candidates.rbegin(), candidates.rend());  // newest first
  for (const auto& [step, name] : candidates) {
    if (auto r = attempt(name)) return r;
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
