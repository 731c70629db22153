#include "brigade/ckpt/manifest.h"

#include <cstdio>
#include <limits>

#include "brigade/base/error.h"
#include "brigade/base/json_limits.h"

namespace brigade {

namespace {

constexpr std::string_view kStepPrefix = "step_";
constexpr std::string_view kStagingSuffix = ".tmp";
// The seal that ends manifest.json: kSealHead, 8 lowercase hex digits, kSealTail.
constexpr std::string_view kSealKey = "manifest_crc32";
constexpr std::string_view kSealHead = ",\n  \"manifest_crc32\": \"0x";
constexpr std::string_view kSealTail = "\"\n}\n";
constexpr size_t kSealBytes = kSealHead.size() + 8 + kSealTail.size();
constexpr std::string_view kLatestCrcPrefix = "crc32 0x";

std::string hex8(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

// Exactly 8 lowercase hex digits -> value.
std::optional<uint32_t> parse_hex8(std::string_view s) {
  if (s.size() != 8) return std::nullopt;
  uint32_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = v * 16 + static_cast<uint32_t>(d);
  }
  return v;
}

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
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name != kManifestFileName && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

std::string latest_file_text(int64_t step) {
  const std::string name = step_dir_name(step);
  return name + "\n" + std::string(kLatestCrcPrefix) + hex8(crc32_of(name)) + "\n";
}

std::optional<std::string> parse_latest_file_text(std::string_view text) {
  const size_t eol = text.find('\n');
  const std::string name(text.substr(0, eol));
  if (!parse_step_dir_name(name)) return std::nullopt;
  std::string_view rest = eol == std::string_view::npos ? "" : text.substr(eol + 1);
  if (rest.empty()) return name;  // written before `latest` carried a CRC
  if (!rest.starts_with(kLatestCrcPrefix) || !rest.ends_with("\n")) return std::nullopt;
  rest = rest.substr(kLatestCrcPrefix.size(), rest.size() - kLatestCrcPrefix.size() - 1);
  const auto crc = parse_hex8(rest);
  if (!crc || *crc != crc32_of(name)) return std::nullopt;
  return name;
}

nlohmann::json Manifest::to_json() const {
  nlohmann::json files_json = nlohmann::json::object();
  for (const auto& [name, d] : files) files_json[name] = {{"bytes", d.bytes}, {"crc32", d.crc32}};
  nlohmann::json j = {{"format_version", format_version},
                      {"step", step},
                      {"files", std::move(files_json)},
                      {"state", state}};
  if (is_sharded_format(format_version)) j["sharding"] = sharding;
  return j;
}

std::string sealed_manifest_text(const Manifest& m) {
  std::string body = m.to_json().dump(2);  // "{\n  ...\n}"
  while (!body.empty() && (body.back() == '}' || body.back() == '\n')) body.pop_back();
  return body + std::string(kSealHead) + hex8(crc32_of(body)) + std::string(kSealTail);
}

Manifest parse_manifest_text(std::string_view text, const std::string& path, bool* unsealed) {
  auto bad = [&](const std::string& what) { return CheckpointError(path + ": " + what); };
  const bool has_seal = text.size() > kSealBytes && text.ends_with(kSealTail) &&
                        text.substr(text.size() - kSealBytes, kSealHead.size()) == kSealHead;
  if (has_seal) {
    const std::string_view body = text.substr(0, text.size() - kSealBytes);
    const auto sealed = parse_hex8(text.substr(body.size() + kSealHead.size(), 8));
    const uint32_t actual = crc32_of(body);
    if (!sealed || *sealed != actual) {
      throw bad("the manifest's checksum does not match its content (crc32 0x" + hex8(actual) +
                " over " + std::to_string(body.size()) + " bytes, sealed " +
                (sealed ? "0x" + hex8(*sealed) : std::string("unreadable")) + "): corrupt");
    }
  }
  nlohmann::json j;
  try {
    j = parse_json_bounded(text, path, JsonLimits{.max_bytes = kMaxManifestBytes});
  } catch (const IoError& e) {
    throw CheckpointError(std::string(e.what()) +
                          (has_seal ? "" : " (and no checksum seal at the end: a torn write?)"));
  }
  if (has_seal) {
    if (!j.is_object()) throw bad("manifest is not a JSON object");
    j.erase(std::string(kSealKey));
  }
  Manifest m = Manifest::from_json(j, path);
  if (!has_seal && m.format_version == kShardedCheckpointFormatVersion) {
    throw bad("format_version " + std::to_string(m.format_version) +
              " must end with its checksum seal \"" + std::string(kSealKey) +
              "\" (torn write or corrupt)");
  }
  if (unsealed) *unsealed = !has_seal;
  return m;
}

Manifest Manifest::from_json(const nlohmann::json& j, const std::string& path) {
  auto bad = [&](const std::string& what) { return CheckpointError(path + ": " + what); };
  if (!j.is_object()) throw bad("manifest is not a JSON object");
  const auto version = j.find("format_version");
  if (version == j.end() || !version->is_number_integer()) throw bad("missing format_version");
  const int64_t v = version->get<int64_t>();
  if (v != kCheckpointFormatVersion && v != kLegacyShardedFormatVersion &&
      v != kShardedCheckpointFormatVersion) {
    throw bad("format_version " + std::to_string(v) + " is not supported (this build reads " +
              std::to_string(kCheckpointFormatVersion) + " to " +
              std::to_string(kShardedCheckpointFormatVersion) + ")");
  }
  Manifest m;
  m.format_version = static_cast<int>(version->get<int64_t>());
  if (is_sharded_format(m.format_version)) {
    const auto sharding = j.find("sharding");
    if (sharding == j.end() || !sharding->is_object()) {
      throw bad("format_version " + std::to_string(m.format_version) +
                " needs a 'sharding' object");
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
    if (!is_checkpoint_file_name(name)) {
      throw bad("file name " + json_excerpt(nlohmann::json(name)) + " is not allowed");
    }
    const auto bytes = v.is_object() ? v.find("bytes") : v.end();
    const auto crc = v.is_object() ? v.find("crc32") : v.end();
    if (!v.is_object() || bytes == v.end() || crc == v.end() || !bytes->is_number_integer() ||
        !crc->is_number_unsigned() || bytes->get<int64_t>() < 0 ||
        crc->get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
      throw bad("files['" + name + "'] needs non-negative integer bytes and a 32-bit crc32");
    }
    m.files[name] = FileDigest{bytes->get<int64_t>(), static_cast<uint32_t>(crc->get<uint64_t>())};
  }
  const auto state = j.find("state");
  if (state == j.end()) throw bad("state is missing");
  m.state = *state;
  return m;
}

}  // namespace brigade
