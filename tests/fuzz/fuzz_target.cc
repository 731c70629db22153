#include "fuzz/fuzz_target.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <utility>

#include "brigade/base/error.h"

namespace brigade::fuzz {

namespace {

using Maker = TargetMaker;

std::vector<std::pair<std::string, Maker>>& registry() {
  static std::vector<std::pair<std::string, Maker>> targets = {
      {"config", make_config_target},
      {"config_set", make_config_set_target},
      {"hf_config", make_hf_config_target},
      {"safetensors", make_safetensors_target},
      {"token_shard", make_token_shard_target},
      {"shard_folder", make_shard_folder_target},
      {"shard_index", make_shard_index_target},
      {"idx_images", make_idx_images_target},
      {"idx_labels", make_idx_labels_target},
      {"bpe", make_bpe_target},
      {"jsonl", make_jsonl_target},
      {"checkpoint_manifest", make_checkpoint_manifest_target},
      {"checkpoint_resealed", make_checkpoint_resealed_target},
      {"checkpoint_shard", make_checkpoint_shard_target},
      {"store", make_store_target},
      {"ps_message", make_ps_message_target},
      {"fed_message", make_fed_message_target},
      {"fed_state", make_fed_state_target},
      {"fed_state_resealed", make_fed_state_resealed_target},
      {"secagg_message", make_secagg_message_target},
  };
  return targets;
}

std::string excerpt(std::string_view s) {
  return std::string(s.substr(0, 300)) + (s.size() > 300 ? "..." : "");
}

}  // namespace

std::vector<std::string> target_names() {
  std::vector<std::string> names;
  for (const auto& [name, maker] : registry()) names.push_back(name);
  return names;
}

void register_target(const std::string& name, TargetMaker maker) {
  registry().emplace_back(name, maker);
}

std::unique_ptr<Target> make_target(std::string_view name, const std::string& dir) {
  for (const auto& [n, maker] : registry()) {
    if (n == name) {
      std::filesystem::create_directories(dir);
      return maker(dir);
    }
  }
  throw std::invalid_argument("no fuzz target named " + std::string(name));
}

Outcome run_case(Target& target, std::string_view input) {
  Outcome outcome;
  try {
    outcome = target.run(input);
    outcome.accepted = true;
  } catch (const Error& e) {
    const std::string_view what = e.what();
    if (what.size() > kMaxMessageBytes) {
      throw std::logic_error("rejection message of " + std::to_string(what.size()) +
                             " bytes (limit " + std::to_string(kMaxMessageBytes) +
                             "): " + excerpt(what));
    }
    const std::string needle = target.names();
    if (!needle.empty() && what.find(needle) == std::string_view::npos && !target.locates(what)) {
      throw std::logic_error("rejection message does not name " + needle + ": " + excerpt(what));
    }
    outcome.accepted = false;
    outcome.exit_code = e.exit_code();
    return outcome;
  }
  if (outcome.changed && target.checksummed()) {
    throw std::logic_error(
        "silent loss: the input was accepted but its data differs from the "
        "seed's, and the format has a checksum");
  }
  return outcome;
}

void write_scratch(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      ::close(fd);
      throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(w);
  }
  ::close(fd);
}

std::string read_scratch(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace brigade::fuzz
