#include "brigade/comm/key_file.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <zmq.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"

namespace brigade {

namespace {

constexpr int64_t kMaxKeyFileBytes = 4096;

// What tells the two kinds apart: their headers, how a key is written, and how a secret key
// gives its public half (nullopt when it is not a key of the kind).
struct KeyFormat {
  const char* secret_header;
  const char* public_header;
  std::function<bool(const std::string&)> is_key;
  std::function<std::optional<std::string>(const std::string&)> public_of_secret;
};

std::optional<std::string> tls_seed(const std::string& hex) {
  return key_from_hex(hex, kPeerKeyBytes);
}

const KeyFormat& format_of(KeyKind kind) {
  static const KeyFormat curve{"brigade-curve-secret-key-v1", "brigade-curve-public-key-v1",
                               [](const std::string& s) {
                                 uint8_t raw[32];
                                 return s.size() == 40 && zmq_z85_decode(raw, s.c_str()) != nullptr;
                               },
                               [](const std::string& secret) -> std::optional<std::string> {
                                 char derived[41];
                                 if (zmq_curve_public(derived, secret.c_str()) != 0)
                                   return std::nullopt;
                                 return std::string(derived, 40);
                               }};
  static const KeyFormat tls{"brigade-tls-secret-key-v1", "brigade-tls-public-key-v1",
                             [](const std::string& s) { return tls_seed(s).has_value(); },
                             [](const std::string& secret) -> std::optional<std::string> {
                               auto seed = tls_seed(secret);
                               if (!seed) return std::nullopt;
                               return key_to_hex(PeerIdentity::from_seed(*seed)->public_key);
                             }};
  return kind == KeyKind::kCurve ? curve : tls;
}

// The flag of `brigade keygen` that makes keys of this kind (curve is the default).
const char* kind_flag(KeyKind kind) {
  return kind == KeyKind::kTls ? " --kind tls" : "";
}

std::string read_small(const std::string& path, const std::string& key, KeyKind kind) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw ConfigError(
        fmt::format("{} = \"{}\": no such key file (create one with `brigade "
                    "keygen --out NAME{}`)",
                    key, path, kind_flag(kind)));
  }
  try {
    return read_file(path, kMaxKeyFileBytes);
  } catch (const Error& e) {
    throw ConfigError(fmt::format("{} = \"{}\": {}", key, path, e.what()));
  }
}

struct TextPair {
  std::string public_key, secret_key;
};

TextPair read_secret(const std::string& path, const std::string& key, KeyKind kind) {
  const KeyFormat& f = format_of(kind);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    throw ConfigError(
        fmt::format("{} = \"{}\": the secret key file has mode {:o}, readable by "
                    "others; run chmod 600 on it",
                    key, path, st.st_mode & 0777));
  }
  std::istringstream in(read_small(path, key, kind));
  std::string header, pub_word, pub, sec_word, sec, rest;
  std::getline(in, header);
  in >> pub_word >> pub >> sec_word >> sec;
  const bool extra = static_cast<bool>(in >> rest);
  if (header != f.secret_header || pub_word != "public" || sec_word != "secret" || extra ||
      !f.is_key(pub) || !f.is_key(sec)) {
    throw ConfigError(fmt::format("{} = \"{}\": not a secret key file of `brigade keygen{}`", key,
                                  path, kind_flag(kind)));
  }
  const std::optional<std::string> derived = f.public_of_secret(sec);
  if (!derived || *derived != pub) {
    throw ConfigError(
        fmt::format("{} = \"{}\": the secret key does not belong to the public key written with it",
                    key, path));
  }
  return {.public_key = pub, .secret_key = sec};
}

std::string read_public(const std::string& path, const std::string& key, KeyKind kind) {
  const KeyFormat& f = format_of(kind);
  std::istringstream in(read_small(path, key, kind));
  std::string header, pub, rest;
  std::getline(in, header);
  in >> pub;
  const bool extra = static_cast<bool>(in >> rest);
  if (header != f.public_header || extra || !f.is_key(pub)) {
    throw ConfigError(fmt::format("{} = \"{}\": not a public key file of `brigade keygen{}`", key,
                                  path, kind_flag(kind)));
  }
  return pub;
}

}  // namespace

const char* key_kind_name(KeyKind kind) {
  return kind == KeyKind::kCurve ? "curve" : "tls";
}

std::string write_new_key_pair(const std::string& stem, KeyKind kind) {
  const std::string secret_path = stem + ".key", public_path = stem + ".pub";
  for (const std::string& p : {secret_path, public_path}) {
    if (std::filesystem::exists(p)) {
      throw ConfigError(
          fmt::format("--out {}: {} exists; keygen never replaces a key (remove it "
                      "first if you mean to)",
                      stem, p));
    }
  }
  // A missing folder is made private (0700), as ssh-keygen's ~/.ssh.
  const std::filesystem::path folder = std::filesystem::path(stem).parent_path();
  std::error_code ec;
  if (!folder.empty() && !std::filesystem::exists(folder, ec)) {
    std::filesystem::create_directories(folder, ec);
    if (ec) {
      throw ConfigError(fmt::format("--out {}: cannot create the folder {}: {}", stem,
                                    folder.string(), ec.message()));
    }
    std::filesystem::permissions(folder, std::filesystem::perms::owner_all, ec);
  }
  std::string public_text, secret_text;
  if (kind == KeyKind::kCurve) {
    const CurveKeyPair keys = CurveKeyPair::generate();
    public_text = keys.public_key;
    secret_text = keys.secret_key;
  } else {
    const PeerIdentity id = PeerIdentity::generate();
    public_text = key_to_hex(id.public_key);
    secret_text = key_to_hex(id.seed);
  }
  const KeyFormat& f = format_of(kind);
  write_file_atomic(
      secret_path,
      fmt::format("{}\npublic {}\nsecret {}\n", f.secret_header, public_text, secret_text), 0600);
  write_file_atomic(public_path, fmt::format("{}\n{}\n", f.public_header, public_text), 0644);
  return public_text;
}

CurveKeyPair read_secret_key_file(const std::string& path, const std::string& key) {
  TextPair p = read_secret(path, key, KeyKind::kCurve);
  return {.public_key = p.public_key, .secret_key = p.secret_key};
}

std::string read_public_key_file(const std::string& path, const std::string& key) {
  return read_public(path, key, KeyKind::kCurve);
}

PeerIdentity read_tls_secret_key_file(const std::string& path, const std::string& key) {
  TextPair p = read_secret(path, key, KeyKind::kTls);
  return *PeerIdentity::from_seed(*tls_seed(p.secret_key));
}

std::string read_tls_public_key_file(const std::string& path, const std::string& key) {
  return *key_from_hex(read_public(path, key, KeyKind::kTls), kPeerKeyBytes);
}

}  // namespace brigade
