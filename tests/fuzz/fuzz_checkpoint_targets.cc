// Targets for checkpoints, through the public API only (the manifest format is being changed):
// a tiny sharded checkpoint saved once by ShardedCheckpointSaver (one rank), then one of its
// files replaced by the input and the folder opened with ShardedCheckpointReader::open and
// every tensor read back, as `train` (resume), `generate` and `export` do.
//
// A shard file is covered by the manifest's CRC-32, so a changed tensor that is read without an
// error is a silent loss (a defect). The manifest has no checksum of its own: a mutation that
// still parses can point a tensor at other bytes; those cases are counted, not failed.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "brigade/base/file_io.h"
#include "brigade/ckpt/sharded_reader.h"
#include "brigade/ckpt/sharded_save.h"
#include "brigade/comm/comm_factory.h"
#include "brigade/runtime/config.h"
#include "fuzz/fuzz_target.h"

namespace brigade::fuzz {

namespace {

struct Saved {
  std::string dir;       // the committed step folder
  std::string manifest;  // its manifest.json
  std::string shard;     // its one shard file
};

struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// Two tensors of the same shape, so a manifest that swaps them is a silent change the count
// can see, a scalar, and a vector.
Saved save_tiny_checkpoint(const std::string& root, std::map<std::string, RefTensor>& ref) {
  ref = {{"h.0.attn.w", {{2, 3}, {1, 2, 3, 4, 5, 6}}},
         {"h.0.mlp.w", {{2, 3}, {-1, -2, -3, -4, -5, -6}}},
         {"scale", {{}, {0.5f}}},
         {"adam.m", {{7}, {0, 1, 0, 1, 0, 1, 0}}}};
  std::vector<ShardPiece> pieces;
  std::vector<const void*> data;
  for (const auto& [name, t] : ref) {
    pieces.push_back({name, t.shape, StDtype::kF32, Region::whole(t.shape)});
    data.push_back(t.values.data());
  }
  auto comm = create_communicator(CommOptions{});
  ShardedCheckpointSaver saver(root, *comm, pieces);
  const nlohmann::json state = {{"step", 3}, {"config", Config{}.to_toml()}};
  const SaveResult r = saver.save(3, data, state, nlohmann::json{{"rng", 42}});
  if (!r.ok) throw std::runtime_error("cannot save the seed checkpoint: " + r.error);
  Saved s{r.dir, "", ""};
  for (const auto& e : std::filesystem::directory_iterator(r.dir)) {
    const std::string name = e.path().filename().string();
    if (name == "manifest.json") s.manifest = name;
    if (e.path().extension() == ".safetensors") s.shard = name;
  }
  if (s.manifest.empty() || s.shard.empty())
    throw std::runtime_error("unexpected checkpoint files");
  return s;
}

// What the fuzzed bytes become: the manifest as mutated (almost always rejected by its seal),
// the manifest mutated and then sealed again (so that the structure checks behind the seal see
// the mutations, as a deliberately forged manifest would reach them), or a shard file.
enum class Part { kManifest, kResealedManifest, kShard };

// The mutated manifest text with its seal recomputed: the seal of any old one is dropped and a
// new one computed over the body up to its last '}' (ckpt/manifest.h's layout).
std::string reseal(std::string_view text) {
  const size_t seal = text.rfind(",\n  \"manifest_crc32\"");
  std::string body(text.substr(0, seal == std::string_view::npos ? text.size() : seal));
  if (seal == std::string_view::npos) {
    const size_t close = body.rfind('}');
    if (close == std::string::npos) return body;
    body.resize(close);
  }
  while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) body.pop_back();
  char crc[16];
  std::snprintf(crc, sizeof(crc), "%08x", crc32_of(body));
  return body + ",\n  \"manifest_crc32\": \"0x" + crc + "\"\n}\n";
}

class CheckpointTarget final : public Target {
 public:
  CheckpointTarget(const std::string& dir, Part part)
      : part_(part), manifest_(part != Part::kShard) {
    saved_ = save_tiny_checkpoint(dir + "/checkpoints", ref_);
    file_ = saved_.dir + "/" + (manifest_ ? saved_.manifest : saved_.shard);
    seed_ = read_scratch(file_);
  }

  std::vector<std::string> seeds() override { return {seed_}; }

  Outcome run(std::string_view input) override {
    write_scratch(file_, part_ == Part::kResealedManifest ? reseal(input) : std::string(input));
    const ShardedCheckpointReader r = ShardedCheckpointReader::open(saved_.dir);
    Outcome o;
    for (const auto& [name, entry] : r.index().tensors) {
      const auto it = ref_.find(name);
      // Another name or shape is not silent: loading the model names the missing tensor.
      if (it == ref_.end() || it->second.shape != entry.shape || entry.dtype != StDtype::kF32) {
        continue;
      }
      std::vector<float> got(it->second.values.size());
      r.read_f32(name, Region::whole(entry.shape), got.data(), static_cast<int64_t>(got.size()));
      o.changed |= std::memcmp(got.data(), it->second.values.data(), got.size() * 4) != 0;
    }
    (void)r.rank_state(0);
    return o;
  }

  std::string names() const override { return saved_.dir; }
  // The shard is checksummed by the manifest, the manifest by its own seal (format 3); a
  // resealed manifest may point a key at another tensor's bytes by design (a CRC is no
  // defence against forgery), so its data changes are counted, not failed.
  bool checksummed() const override { return part_ != Part::kResealedManifest; }

 private:
  Part part_;
  bool manifest_;
  Saved saved_;
  std::map<std::string, RefTensor> ref_;
  std::string file_;
  std::string seed_;
};

}  // namespace

std::unique_ptr<Target> make_checkpoint_manifest_target(const std::string& dir) {
  return std::make_unique<CheckpointTarget>(dir, Part::kManifest);
}
std::unique_ptr<Target> make_checkpoint_resealed_target(const std::string& dir) {
  return std::make_unique<CheckpointTarget>(dir, Part::kResealedManifest);
}
std::unique_ptr<Target> make_checkpoint_shard_target(const std::string& dir) {
  return std::make_unique<CheckpointTarget>(dir, Part::kShard);
}

}  // namespace brigade::fuzz
