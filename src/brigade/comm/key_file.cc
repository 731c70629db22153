#include "brigade/comm/key_file.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <zmq.h>

#include <filesystem>
#include <sstream>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"

namespace brigade {

namespace {

constexpr const char* kSecretHeader = "brigade-curve-secret-key-v1";
constexpr const char* kPublicHeader = "brigade-curve-public-key-v1";
constexpr int64_t kMaxKeyFileBytes = 4096;

bool is_z85_key(const std::string& s) {
  if (s.size() != 40) return false;
  uint8_t raw[32];
  return zmq_z85_decode(raw, s.c_str()) != nullptr;
}

std::string read_small(const std::string& path, const std::string& key) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw ConfigError(
        fmt::format("{} = \"{}\": no such key file (create one with `brigade "
                    "keygen --out NAME`)",
                    key, path));
  }
  try {
    return read_file(path, kMaxKeyFileBytes);
  } catch (const Error& e) {
    throw ConfigError(fmt::format("{} = \"{}\": {}", key, path, e.what()));
  }
}

}  // namespace

std::string write_new_key_pair(const std::string& stem) {
  const std::string secret_path = stem + ".key", public_path = stem + ".pub";
  for (const std::string& p : {secret_path, public_path}) {
    if (std::filesystem::exists(p)) {
      throw ConfigError(
          fmt::format("--out {}: {} exists; keygen never replaces a key (remove it "
                      "first if you mean to)",
                      stem, p));
    }
  }
  const CurveKeyPair keys = CurveKeyPair::generate();
  write_file_atomic(
      secret_path,
      fmt::format("{}\npublic {}\nsecret {}\n", kSecretHeader, keys.public_key, keys.secret_key),
      0600);
  write_file_atomic(public_path, fmt::format("{}\n{}\n", kPublicHeader, keys.public_key), 0644);
  return keys.public_key;
}

CurveKeyPair read_secret_key_file(const std::string& path, const std::string& key) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    throw ConfigError(
        fmt::format("{} = \"{}\": the secret key file has mode {:o}, readable by "
                    "others; run chmod 600 on it",
                    key, path, st.st_mode & 0777));
  }
  std::istringstream in(read_small(path, key));
  std::string header, pub_word, pub, sec_word, sec, rest;
  std::getline(in, header);
  in >> pub_word >> pub >> sec_word >> sec;
  const bool extra = static_cast<bool>(in >> rest);
  if (header != kSecretHeader || pub_word != "public" || sec_word != "secret" || extra ||
      !is_z85_key(pub) || !is_z85_key(sec)) {
    throw ConfigError(
        fmt::format("{} = \"{}\": not a secret key file of `brigade keygen`", key, path));
  }
  char derived[41];
  if (zmq_curve_public(derived, sec.c_str()) != 0 || pub != std::string(derived, 40)) {
    throw ConfigError(
        fmt::format("{} = \"{}\": the secret key does not belong to the public key written with it",
                    key, path));
  }
  return {.public_key = pub, .secret_key = sec};
}

std::string read_public_key_file(const std::string& path, const std::string& key) {
  std::istringstream in(read_small(path, key));
  std::string header, pub, rest;
  std::getline(in, header);
  in >> pub;
  const bool extra = static_cast<bool>(in >> rest);
  if (header != kPublicHeader || extra || !is_z85_key(pub)) {
    throw ConfigError(
        fmt::format("{} = \"{}\": not a public key file of `brigade keygen`", key, path));
  }
  return pub;
}

}  // namespace brigade
