#pragma once
// One fuzz target per parser the CLI reaches: the body that both the bounded campaign
// (tests/fuzz/parsers_fault_test.cc) and the libFuzzer targets (tests/fuzz/libfuzzer/) run.
//
// Contract of a case: the parser either accepts the input or throws a brigade::Error
// (ConfigError, IoError, CheckpointError, ...) whose message is bounded and, for a file, names
// the file. Anything else is a defect: another exception type, a crash, a hang, a case slower
// than about a second, an unbounded message, or (where the format has a checksum) data that
// changed without an error.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::fuzz {

struct Outcome {
  bool accepted = false;  // parsed (and its content used) without an error
  int exit_code = 0;      // rejected: the exit code of the brigade::Error (2 config, 3 file, ...)
  // Accepted, but what was read differs from the seed the input came from. A defect for
  // formats with a checksum (checkpoints: a silent loss); informative for the others.
  bool changed = false;
};

class Target {
 public:
  virtual ~Target() = default;

  // Valid inputs made by the project's own writers (write_safetensors, write_token_shard, the
  // checkpoint saver, ...), the starting points of mutation.
  virtual std::vector<std::string> seeds() = 0;

  // Feeds input to the parser the way the CLI would. Returns when it is accepted; lets a
  // brigade::Error through when it is rejected.
  virtual Outcome run(std::string_view input) = 0;

  // Text every rejection message must contain (the file's name), or "" for none.
  virtual std::string names() const { return ""; }
  // Whether a rejection message that lacks names() still says where the problem is (a config's
  // validation names the key, not the file).
  virtual bool locates(std::string_view /*message*/) const { return false; }

  // Substrings of defects already known in code that is being rewritten by someone else: the
  // campaign reports them apart and does not fail on them. Each entry says whose it is.
  virtual std::vector<std::string> known_defects() const { return {}; }

  // True when data read back must equal the seed's unless an error is thrown.
  virtual bool checksummed() const { return false; }
};

// Every target's name, in the order the campaign runs them.
std::vector<std::string> target_names();

// Adds a target (the campaign's own tests register misbehaving ones).
using TargetMaker = std::unique_ptr<Target> (*)(const std::string& dir);
void register_target(const std::string& name, TargetMaker maker);

// The target called name, its scratch files under dir (created). Throws std::invalid_argument
// for an unknown name.
std::unique_ptr<Target> make_target(std::string_view name, const std::string& dir);

// Longest rejection message accepted: an error quotes excerpts, never whole values.
inline constexpr size_t kMaxMessageBytes = 4096;

// Runs one case: Target::run with its brigade::Error turned into a rejected Outcome, after
// checking the message (bounded, names the file). Throws std::logic_error describing the
// defect when a message breaks those rules or a checksummed target changed silently; any
// exception that is not a brigade::Error passes through. Both are defects for the caller.
Outcome run_case(Target& target, std::string_view input);

// Writes bytes to path without fsync (scratch files of a case).
void write_scratch(const std::string& path, std::string_view bytes);
// Reads a whole file (scratch or seed).
std::string read_scratch(const std::string& path);

// Makers of the individual targets (one file each group).
std::unique_ptr<Target> make_config_target(const std::string& dir);
std::unique_ptr<Target> make_config_set_target(const std::string& dir);
std::unique_ptr<Target> make_hf_config_target(const std::string& dir);
std::unique_ptr<Target> make_bpe_target(const std::string& dir);
std::unique_ptr<Target> make_jsonl_target(const std::string& dir);
std::unique_ptr<Target> make_safetensors_target(const std::string& dir);
std::unique_ptr<Target> make_token_shard_target(const std::string& dir);
std::unique_ptr<Target> make_shard_folder_target(const std::string& dir);
std::unique_ptr<Target> make_shard_index_target(const std::string& dir);
std::unique_ptr<Target> make_idx_images_target(const std::string& dir);
std::unique_ptr<Target> make_idx_labels_target(const std::string& dir);
std::unique_ptr<Target> make_checkpoint_manifest_target(const std::string& dir);
std::unique_ptr<Target> make_checkpoint_resealed_target(const std::string& dir);
std::unique_ptr<Target> make_checkpoint_shard_target(const std::string& dir);
std::unique_ptr<Target> make_store_target(const std::string& dir);
std::unique_ptr<Target> make_ps_message_target(const std::string& dir);
std::unique_ptr<Target> make_fed_message_target(const std::string& dir);
std::unique_ptr<Target> make_fed_state_target(const std::string& dir);
std::unique_ptr<Target> make_fed_state_resealed_target(const std::string& dir);
std::unique_ptr<Target> make_secagg_message_target(const std::string& dir);

}  // namespace brigade::fuzz
