#pragma once
#include <cstdint>
#include <memory>

#include "brigade/model/model.h"
#include "brigade/runtime/config.h"

namespace brigade {

// The model a config describes, with activation buffers for micro-batches of max_batch
// examples. Parameters are zero until Model::initialize().
std::unique_ptr<Model> make_model(const ModelConfig& config, int64_t max_batch);

}  // namespace brigade
