#include "brigade/ckpt/checkpoint_validation.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "brigade/base/check.h"
#include "brigade/base/error.h"

namespace brigade {

namespace fs = std::filesystem;

namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

}  // namespace

std::string strip_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

void report_rejected_checkpoint(const std::string& what, std::vector<std::string>* rejections) {
  const std::string line = "checkpoint rejected: " + what;
  std::fprintf(stderr, "[rank %d] warning: %s\n", detail::log_rank(), line.c_str());
  if (rejections) rejections->push_back(line);
}

Manifest load_manifest(const std::string& dir) {
  const std::string manifest_path = dir + "/" + kManifestFileName;
  std::string text;
  try {
    text = read_file(manifest_path, kMaxManifestBytes);
  } catch (const IoError& e) {
    throw CheckpointError(e.what());  // names the manifest path and errno text
  }
  bool unsealed = false;
  Manifest m = parse_manifest_text(text, manifest_path, &unsealed);
  if (unsealed && detail::log_rank() == 0) {  // every rank reads it; one line is enough
    std::fprintf(stderr,
                 "[rank %d] warning: %s carries no checksum (written by an older brigade); "
                 "only its structure is checked\n",
                 detail::log_rank(), manifest_path.c_str());
  }
  const auto folder_step = parse_step_dir_name(fs::path(dir).filename().string());
  if (folder_step && *folder_step != m.step) {
    throw CheckpointError(manifest_path + ": step " + std::to_string(m.step) +
                          " does not match the folder name");
  }
  return m;
}

void verify_checkpoint_file(const std::string& dir, const std::string& name,
                            const FileDigest& expected) {
  const std::string path = dir + "/" + name;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    throw CheckpointError(path + ": listed in the manifest but " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw CheckpointError(path + ": not a regular file");
  if (st.st_size != expected.bytes) {
    throw CheckpointError(path + ": " + std::to_string(st.st_size) + " bytes, the manifest says " +
                          std::to_string(expected.bytes) + " (truncated or overwritten)");
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

std::vector<std::string> checkpoint_candidates(
    const std::string& root, const std::function<void(const std::string&)>& reject) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;

  const std::string latest = root + "/" + kLatestFileName;
  if (fs::exists(latest, ec)) {
    try {
      if (const auto name = parse_latest_file_text(read_file(latest, 4096))) {
        out.push_back(*name);
      } else {
        reject(latest + ": does not name a checkpoint folder, or fails its checksum");
      }
    } catch (const IoError& e) {
      reject(e.what());
    }
  }

  std::vector<std::pair<int64_t, std::string>> others;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    const auto step = parse_step_dir_name(name);
    if (step && (out.empty() || name != out.front())) others.emplace_back(*step, name);
  }
  if (ec) throw IoError("cannot list checkpoint folder " + root + ": " + ec.message());
  std::sort(others.rbegin(), others.rend());  // newest first
  for (auto& [step, name] : others) out.push_back(std::move(name));
  return out;
}

}  // namespace brigade
