#pragma once
// Cutting a stack of layers into pipeline stages: consecutive runs of layers, one per global
// stage, either given explicitly or balanced by parameter count.
#include <cstdint>
#include <vector>

namespace brigade {

// Layers per stage for `stages` stages over layers with the given parameter counts, minimising
// the largest stage's parameter count (ties: earlier stages take fewer layers). Throws
// ConfigError when there are more stages than layers.
std::vector<int> balance_layers(const std::vector<int64_t>& layer_params, int stages);

// Checks an explicit split: `stages` entries, each >= 1, summing to n_layers. Throws ConfigError
// naming the entry and the totals.
void validate_layer_split(const std::vector<int>& layers_per_stage, int stages, int n_layers);

// First layer of each stage plus the end: {0, n0, n0 + n1, ..., n_layers}.
std::vector<int> stage_boundaries(const std::vector<int>& layers_per_stage);

}  // namespace brigade
