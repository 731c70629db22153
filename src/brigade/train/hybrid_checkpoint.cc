#include "brigade/train/hybrid_checkpoint.h"

#include <fmt/format.h>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/ckpt/sharded_reader.h"
#include "brigade/parallel/tensor/tp_layout.h"

namespace brigade {

// A chunk's tensors in the full layout, and the gathered buffers the saver reads.
struct HybridCheckpointer::Part {
  HybridChunk chunk;
  ParamLayout full;                       // the chunk's tensors at tp = 1, by name
  std::vector<float> params;              // full.total()
  std::vector<StateView> states;          // the optimizer's, over the chunk's local layout
  std::vector<std::vector<float>> state;  // per state view: full.total()
};

namespace {

ParamLayout full_layout_of(const ParamLayout& local) {
  ParamLayout full;
  for (const ParamSpec& s : local.specs()) {
    ParamSpec f;
    f.name = s.name;
    f.shape = s.full_shape.empty() ? s.shape : s.full_shape;
    f.init = s.init;
    f.weight_decay = s.weight_decay;
    full.add(std::move(f));
  }
  return full;
}

std::string state_tensor_name(const std::string& state, const std::string& tensor) {
  return state + "/" + tensor;
}

}  // namespace

HybridCheckpointer::HybridCheckpointer(std::string root, Communicator& world, const TpContext& tp,
                                       std::vector<HybridChunk> chunks, int keep_last,
                                       nlohmann::json mesh)
    : root_(std::move(root)), world_(world), tp_(tp) {
  std::vector<ShardPiece> pieces;
  for (const HybridChunk& c : chunks) {
    auto part = std::make_unique<Part>();
    part->chunk = c;
    part->full = full_layout_of(c.stage->layout());
    part->params.assign(static_cast<size_t>(part->full.total()), 0.0f);
    part->states = c.optimizer->state_tensors();
    for (const StateView& v : part->states) {
      BRIGADE_CHECK(v.begin == 0 && v.end == c.stage->num_params())
          << v.name << " covers [" << v.begin << ", " << v.end << ")";
      part->state.emplace_back(static_cast<size_t>(part->full.total()), 0.0f);
    }
    for (const ParamSpec& f : part->full.specs()) {
      pieces.push_back(
          ShardPiece{.tensor = f.name, .shape = f.shape, .region = Region::whole(f.shape)});
      data_.push_back(part->params.data() + f.offset);
    }
    for (size_t k = 0; k < part->states.size(); ++k) {
      for (const ParamSpec& f : part->full.specs()) {
        pieces.push_back(ShardPiece{.tensor = state_tensor_name(part->states[k].name, f.name),
                                    .shape = f.shape,
                                    .region = Region::whole(f.shape)});
        data_.push_back(part->state[k].data() + f.offset);
      }
    }
    parts_.push_back(std::move(part));
  }
  saver_ = std::make_unique<ShardedCheckpointSaver>(
      root_, world_, std::move(pieces), std::move(mesh), CheckpointOptions{.keep_last = keep_last});
}

HybridCheckpointer::~HybridCheckpointer() = default;

void HybridCheckpointer::gather() {
  for (auto& p : parts_) {
    const ParamLayout& local = p->chunk.stage->layout();
    gather_full(tp_, local, p->full, p->chunk.stage->params(), p->params.data());
    for (size_t k = 0; k < p->states.size(); ++k) {
      gather_full(tp_, local, p->full, p->states[k].data, p->state[k].data());
    }
  }
}

SaveResult HybridCheckpointer::save(int64_t step, const nlohmann::json& state) {
  gather();
  return saver_->save(step, data_, state);
}

std::optional<nlohmann::json> HybridCheckpointer::restore(std::string* dir) {
  std::optional<ShardedCheckpointReader> reader =
      ShardedCheckpointReader::open_latest_valid(root_, &world_);
  if (!reader) return std::nullopt;
  auto read_full = [&](const ParamLayout& full, const std::string& state, float* out) {
    for (const ParamSpec& f : full.specs()) {
      const std::string name = state.empty() ? f.name : state_tensor_name(state, f.name);
      if (!reader->contains(name)) {
        throw CheckpointError(fmt::format(
            "{} has no tensor {}: it was not written by a model-parallel run with this optimizer "
            "(start afresh with run.resume = \"never\")",
            reader->dir(), name));
      }
      reader->read_f32(name, Region::whole(f.shape), out + f.offset, f.numel);
    }
  };
  for (auto& p : parts_) {
    const ParamLayout& local = p->chunk.stage->layout();
    read_full(p->full, "", p->params.data());
    slice_from_full(local, p->full, p->params.data(), p->chunk.stage->params());
    for (size_t k = 0; k < p->states.size(); ++k) {
      read_full(p->full, p->states[k].name, p->state[k].data());
      slice_from_full(local, p->full, p->state[k].data(), p->states[k].data);
    }
  }
  if (dir) *dir = reader->dir();
  return reader->state();
}

}  // namespace brigade
