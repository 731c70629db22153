#include "brigade/train/checkpointing.h"

#include <fmt/format.h>

#include <numeric>
#include <set>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/ckpt/checkpoint.h"
#include "brigade/ckpt/hf_gpt2.h"
#include "brigade/ckpt/region.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/model/lora.h"
#include "brigade/monitor/timer.h"

namespace brigade {

namespace {

constexpr const char* kModelFile = "model.safetensors";  // format 1
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kTokenizerFile = "tokenizer.bpe";  // format 1: a file; 2: a U8 tensor

nlohmann::json state_json(const SavedState& s) {
  nlohmann::json j = s.extra;
  j["step"] = s.step;
  j["updates"] = s.updates;
  return j;
}

SavedState state_from(const nlohmann::json& j, const std::string& dir) {
  SavedState s;
  try {
    s.step = j.at("step").get<int64_t>();
    s.updates = j.at("updates").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("{}/manifest.json: bad training state: {}", dir, e.what()));
  }
  s.extra = j;
  return s;
}

// Reads tensor `name` over region into out (f32), after checking that the checkpoint's tensor
// has the shape this model expects.
void read_piece(const ShardedCheckpointReader& reader, const ShardPiece& p, float* out) {
  if (!reader.contains(p.tensor)) {
    throw CheckpointError(
        fmt::format("{} holds no tensor \"{}\" (this run needs it: another "
                    "model or optimizer?)",
                    reader.dir(), p.tensor));
  }
  const ShardTensorEntry& t = reader.tensor(p.tensor);
  if (t.shape != p.shape || t.dtype != p.dtype) {
    throw CheckpointError(fmt::format("{}: tensor \"{}\" has shape [{}] {}; this run needs [{}] {}",
                                      reader.dir(), p.tensor, fmt::join(t.shape, ", "),
                                      st_dtype_name(t.dtype), fmt::join(p.shape, ", "),
                                      st_dtype_name(p.dtype)));
  }
  reader.read_f32(p.tensor, p.region, out, p.region.numel());
}

}  // namespace

TrainingCheckpointer::TrainingCheckpointer(TrainingCheckpointOptions options, Communicator* world,
                                           const CommOptions& world_options,
                                           std::vector<StatePiece> pieces)
    : options_(std::move(options)), pieces_(std::move(pieces)) {
  const int rank = world ? world->rank() : 0;
  std::vector<ShardPiece> shard_pieces;
  for (const StatePiece& p : pieces_) {
    shard_pieces.push_back(p.piece);
    data_.push_back(p.data);
  }
  if (rank == 0 && !options_.tokenizer_file.empty()) {
    tokenizer_ = read_file(options_.tokenizer_file);
    const auto n = static_cast<int64_t>(tokenizer_.size());
    shard_pieces.push_back({kTokenizerFile, {n}, StDtype::kU8, Region::whole({n})});
    data_.push_back(tokenizer_.data());
  }
  const CheckpointOptions ckpt{.keep_last = options_.keep_last};
  if (options_.async || !world) {
    // Its collectives run from the saver's thread (async), or there is no training one.
    if (world) {
      std::vector<int> all(static_cast<size_t>(world->size()));
      std::iota(all.begin(), all.end(), 0);
      own_comm_ = create_subgroup(world_options, all, "ckpt");
    } else {
      own_comm_ = create_communicator(CommOptions{});
    }
  }
  Communicator& comm = own_comm_ ? *own_comm_ : *world;
  if (options_.async) {
    async_ = std::make_unique<AsyncCheckpointSaver>(options_.root, comm, std::move(shard_pieces),
                                                    options_.mesh, ckpt);
  } else {
    sync_ = std::make_unique<ShardedCheckpointSaver>(options_.root, comm, std::move(shard_pieces),
                                                     options_.mesh, ckpt);
  }
}

TrainingCheckpointer::~TrainingCheckpointer() = default;

std::vector<SaveResult> TrainingCheckpointer::save(const SavedState& state) {
  std::vector<SaveResult> done;
  Stopwatch watch;
  if (sync_) {
    done.push_back(sync_->save(state.step, data_, state_json(state)));
  } else {
    while (auto r = async_->poll()) done.push_back(std::move(*r));
    async_->save(state.step, data_, state_json(state));  // waits for the save in flight
    while (auto r = async_->poll()) done.push_back(std::move(*r));
  }
  last_blocking_s_ = watch.seconds();
  return done;
}

std::optional<SaveResult> TrainingCheckpointer::wait() {
  return async_ ? async_->wait() : std::nullopt;
}

std::vector<SaveResult> TrainingCheckpointer::poll() {
  std::vector<SaveResult> done;
  while (async_) {
    std::optional<SaveResult> r = async_->poll();
    if (!r) break;
    done.push_back(std::move(*r));
  }
  return done;
}

void view_legacy_flat_state(ShardedCheckpointReader& reader, const std::vector<StatePiece>& pieces,
                            const ParamLayout& layout) {
  std::set<std::string> flats;  // "adamw.m" of every missing "adamw.m/<tensor>"
  for (const StatePiece& p : pieces) {
    const size_t slash = p.piece.tensor.find('/');
    if (slash != std::string::npos && !reader.contains(p.piece.tensor)) {
      flats.insert(p.piece.tensor.substr(0, slash));
    }
  }
  if (flats.empty()) return;
  std::vector<ShardedCheckpointReader::FlatSlot> slots;
  for (const ParamSpec& s : layout.specs()) slots.push_back({s.name, s.shape, s.offset});
  for (const std::string& flat : flats) reader.add_flat_views(flat, slots, layout.total());
}

std::optional<SavedState> load_latest_checkpoint(const std::string& root, Communicator* world,
                                                 const std::vector<StatePiece>& pieces,
                                                 std::string* dir, const CheckpointCheck& check,
                                                 std::vector<std::string>* rejections,
                                                 const ParamLayout* layout) {
  auto reader = ShardedCheckpointReader::open_latest_valid(root, world, rejections);
  if (!reader) return std::nullopt;
  SavedState state = state_from(reader->state(), reader->dir());
  if (check) check(state, reader->dir());
  if (layout) view_legacy_flat_state(*reader, pieces, *layout);
  for (const StatePiece& p : pieces) read_piece(*reader, p.piece, p.data);
  if (dir) *dir = reader->dir();
  return state;
}

std::string save_checkpoint(const std::string& root, const SavedState& state, const Model& model,
                            Optimizer& optimizer, int keep_last,
                            const std::string& tokenizer_file) {
  CheckpointWriter writer(root, state.step, CheckpointOptions{.keep_last = keep_last});
  std::vector<TensorRef> params;
  for (const auto& spec : model.layout().specs()) {
    params.push_back({spec.name, spec.shape, model.params() + spec.offset});
  }
  writer.add_file(kModelFile, params);
  // Optimizer state per tensor, as every layout saves it ("adamw.m/wte.weight").
  std::vector<TensorRef> opt;
  for (const auto& view : optimizer.state_tensors()) {
    for (const auto& spec : model.layout().specs()) {
      if (spec.offset < view.begin || spec.offset + spec.numel > view.end) continue;
      opt.push_back(
          {view.name + "/" + spec.name, spec.shape, view.data + (spec.offset - view.begin)});
    }
  }
  if (!opt.empty()) writer.add_file(kOptimizerFile, opt);
  if (!tokenizer_file.empty()) {
    std::string copy = writer.staging_dir() + "/" + kTokenizerFile;
    FileDigest digest = write_file_durable(copy, read_file(tokenizer_file));
    writer.add_file_record(kTokenizerFile, digest);
  }
  return writer.commit(state_json(state));
}

namespace {

// train.init_from = "hf:DIR": a Hugging Face GPT-2 folder. Every rank reads the whole model (the
// files hold no shards) into the tp = 1 layout of the architecture config.json describes, then
// copies the regions of its own pieces out of it.
std::string load_initial_hf_weights(const std::string& dir, const std::vector<StatePiece>& pieces) {
  const GptConfig hf = load_hf_gpt2_config(dir);
  ParamLayout layout;
  std::vector<ParamGroup> groups;
  build_gpt_layout(hf, make_gpt_shard(hf, 1, 0), layout, groups);
  std::vector<float> params(static_cast<size_t>(layout.total()));
  load_hf_gpt2_weights(dir, hf, layout, params.data());
  for (const StatePiece& p : pieces) {
    if (p.piece.tensor.find('/') != std::string::npos) continue;
    const ParamSpec* spec = layout.find(p.piece.tensor);
    if (!spec) {
      // An adapter keeps its initialisation, as from a checkpoint without it.
      if (is_lora_tensor(p.piece.tensor)) continue;
      throw CheckpointError(
          fmt::format("{}: the model holds no tensor \"{}\" (this run needs it: "
                      "another architecture?)",
                      dir, p.piece.tensor));
    }
    if (spec->shape != p.piece.shape) {
      throw CheckpointError(fmt::format(
          "{}: tensor \"{}\" has shape [{}]; this run needs [{}] (config.json describes another "
          "model than the run's [model])",
          dir, p.piece.tensor, fmt::join(spec->shape, ", "), fmt::join(p.piece.shape, ", ")));
    }
    float* out = p.data;
    const float* whole = params.data() + spec->offset;
    for (const FlatRun& run : region_runs(p.piece.region, spec->shape)) {
      out = std::copy(whole + run.begin, whole + run.end, out);
    }
  }
  return dir;
}

}  // namespace

std::string load_initial_weights(const std::string& source, Communicator* world,
                                 const std::vector<StatePiece>& pieces, int64_t* step) {
  if (source.rfind(kHfSourcePrefix, 0) == 0) {
    if (step) *step = 0;
    return load_initial_hf_weights(source.substr(std::string_view(kHfSourcePrefix).size()), pieces);
  }
  const std::string dir = resolve_checkpoint_dir(source);
  const ShardedCheckpointReader reader = ShardedCheckpointReader::open(dir, world);
  // Parameters are named as the model names them; everything else (optimizer state, a sync
  // method's per-replica state) is "<state>/<tensor>" and starts afresh.
  for (const StatePiece& p : pieces) {
    if (p.piece.tensor.find('/') != std::string::npos) continue;
    // A base model has no LoRA adapters: a LoRA run from it keeps their initialisation
    // (lora_B = 0: it starts as the source model exactly).
    if (is_lora_tensor(p.piece.tensor) && !reader.contains(p.piece.tensor)) continue;
    read_piece(reader, p.piece, p.data);
  }
  if (step) *step = reader.step();
  return dir;
}

SavedState load_model_weights(const ShardedCheckpointReader& reader, Model& model) {
  for (const StatePiece& p : whole_param_pieces(model)) read_piece(reader, p.piece, p.data);
  return state_from(reader.state(), reader.dir());
}

Config checkpoint_config(const ShardedCheckpointReader& reader) {
  const std::string origin = reader.dir() + "/manifest.json";
  if (!reader.state().contains("config") || !reader.state().at("config").is_string()) {
    throw CheckpointError(fmt::format("{} holds no config", origin));
  }
  return parse_config(reader.state().at("config").get<std::string>(), origin);
}

std::optional<std::string> checkpoint_tokenizer(const ShardedCheckpointReader& reader) {
  if (reader.contains(kTokenizerFile)) {
    const ShardTensorEntry& t = reader.tensor(kTokenizerFile);
    if (t.dtype != StDtype::kU8 || t.shape.size() != 1) {
      throw CheckpointError(
          fmt::format("{}: tensor \"{}\" is not a U8 vector", reader.dir(), kTokenizerFile));
    }
    std::string text(static_cast<size_t>(t.shape[0]), '\0');
    reader.read(kTokenizerFile, Region::whole(t.shape), text.data(),
                static_cast<int64_t>(text.size()));
    return text;
  }
  if (reader.manifest().files.count(kTokenizerFile) != 0) {
    return read_file(reader.dir() + "/" + kTokenizerFile);
  }
  return std::nullopt;
}

}  // namespace brigade
