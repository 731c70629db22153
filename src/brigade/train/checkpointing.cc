#include "brigade/train/checkpointing.h"

#include <fmt/format.h>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/ckpt/checkpoint.h"

namespace brigade {

namespace {

constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kTokenizerFile = "tokenizer.bpe";

nlohmann::json state_json(const SavedState& s) {
  nlohmann::json j = s.extra;
  j["step"] = s.step;
  j["updates"] = s.updates;
  return j;
}

SavedState state_from(const CheckpointReader& reader) {
  const auto& j = reader.state();
  SavedState s;
  try {
    s.step = j.at("step").get<int64_t>();
    s.updates = j.at("updates").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(
        fmt::format("{}/manifest.json: bad training state: {}", reader.dir(), e.what()));
  }
  s.extra = j;
  return s;
}

void read_params(const CheckpointReader& reader, Model& model) {
  for (const auto& spec : model.layout().specs()) {
    reader.read(kModelFile, spec.name, model.params() + spec.offset, spec.shape);
  }
}

}  // namespace

std::string save_checkpoint(const std::string& root, const SavedState& state, const Model& model,
                            Optimizer& optimizer, int keep_last,
                            const std::string& tokenizer_file) {
  CheckpointWriter writer(root, state.step, CheckpointOptions{.keep_last = keep_last});
  std::vector<TensorRef> params;
  for (const auto& spec : model.layout().specs()) {
    params.push_back({spec.name, spec.shape, model.params() + spec.offset});
  }
  writer.add_file(kModelFile, params);
  std::vector<TensorRef> opt;
  for (const auto& view : optimizer.state_tensors()) {
    opt.push_back({view.name, {view.end - view.begin}, view.data});
  }
  if (!opt.empty()) writer.add_file(kOptimizerFile, opt);
  if (!tokenizer_file.empty()) {
    std::string copy = writer.staging_dir() + "/" + kTokenizerFile;
    FileDigest digest = write_file_durable(copy, read_file(tokenizer_file));
    writer.add_file_record(kTokenizerFile, digest);
  }
  return writer.commit(state_json(state));
}

std::optional<SavedState> load_latest_checkpoint(const std::string& root, Model& model,
                                                 Optimizer& optimizer, std::string* dir,
                                                 const CheckpointCheck& check) {
  auto reader = CheckpointReader::open_latest_valid(root);
  if (!reader) return std::nullopt;
  if (check) check(state_from(*reader), reader->dir());
  read_params(*reader, model);
  for (const auto& view : optimizer.state_tensors()) {
    reader->read(kOptimizerFile, view.name, view.data, {view.end - view.begin});
  }
  if (dir) *dir = reader->dir();
  return state_from(*reader);
}

SavedState load_model_weights(const std::string& dir, Model& model) {
  CheckpointReader reader = CheckpointReader::open(dir);
  read_params(reader, model);
  return state_from(reader);
}

}  // namespace brigade
