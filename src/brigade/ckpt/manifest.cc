#include "brigade/ckpt/manifest.h"

#include <cstdio>
#include <limits>

#include "brigade/base/error.h"

namespace brigade {

namespace {

constexpr std::string_view kStepPrefix = "step_";
constexpr std::string_view kStagingSuffix = ".tmp";

// All-digit string -> value, rejecting empty strings and overflow.
std::optional<int64_t> parse_digits(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::optional<int64_t> parse_step_dir_name(std::string_view name) {
  if (!name.starts_with(kStepPrefix)) return std::nullopt;
  const auto step = parse_digits(name.substr(kStepPrefix.size()));
  if (!step || step_dir_name(*step) != name) return std::nullopt;  // only the canonical spelling
  return step;
}

std::optional<int64_t> parse_step_tmp_name(std::string_view name) {
  if (!name.starts_with(kStepPrefix) || !name.ends_with(kStagingSuffix)) return std::nullopt;
  std::string_view digits = name.substr(kStepPrefix.size());
  digits = digits.substr(0, digits.find('.'));
  return parse_digits(digits);
}

bool is_checkpoint_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name != kManifestFileName &&
         name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

nlohmann::json Manifest::to_json() const {
  nlohmann::json files_json = nlohmann::json::object();
  for (const auto& [name, d] : files) files_json[name] = {{"bytes", d.bytes}, {"crc32", d.crc32}};
  nlohmann::json j = {{"format_version", format_version},
                      {"step", step},
                      {"files", std::move(files_json)},
                      {"state", state}};
  if (format_version == kShardedCheckpointFormatVersion) j["sharding"] = sharding;
  return j;
}

Manifest Manifest::from_json(const nlohmann::json& j, const std::string& path) {
  auto bad = [&](const std::string& what) { return CheckpointError(path + ": " + what); };
  if (!j.is_object()) throw bad("manifest is not a JSON object");
  const auto version = j.find("format_version");
  if (version == j.end() || !version->is_number_integer()) throw bad("missing format_version");
  if (version->get<int64_t>() != kCheckpointFormatVersion &&
      version->get<int64_t>() != kShardedCheckpointFormatVersion) {
    throw bad("format_version " + version->dump() + " is not supported (this build reads " +
              std::to_string(kCheckpointFormatVersion) + " and " +
              std::to_string(kShardedCheckpointFormatVersion) + ")");
  }
  Manifest m;
  m.format_version = static_cast<int>(version->get<int64_t>());
  if (m.format_version == kShardedCheckpointFormatVersion) {
    const auto sharding = j.find("sharding");
    if (sharding == j.end() || !sharding->is_object()) {
      throw bad("format_version 2 needs a 'sharding' object");
    }
    m.sharding = *sharding;
  }
  const auto step = j.find("step");
  if (step == j.end() || !step->is_number_integer() || step->get<int64_t>() < 0) {
    throw bad("step is missing or not a non-negative integer");
  }
  m.step = step->get<int64_t>();
  const auto files = j.find("files");
  if (files == j.end() || !files->is_object()) throw bad("files is missing or not an object");
  for (const auto& [name, v] : files->items()) {
    if (!is_checkpoint_file_name(name)) throw bad("file name '" + name + "' is not allowed");
    const auto bytes = v.is_object() ? v.find("bytes") : v.end();
    const auto crc = v.is_object() ? v.find("crc32") : v.end();
    if (!v.is_object() || bytes == v.end() || crc == v.end() || !bytes->is_number_integer() ||
        !crc->is_number_unsigned() || bytes->get<int64_t>() < 0 ||
        crc->get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
      throw bad("files['" + name + "'] needs non-negative integer bytes and a 32-bit crc32, got " +
                v.dump());
    }
    m.files[name] = FileDigest{bytes->get<int64_t>(), static_cast<uint32_t>(crc->get<uint64_t>())};
  }
  const auto state = j.find("state");
  if (state == j.end()) throw bad("state is missing");
  m.state = *state;
  return m;
}

}  // namespace brigade
