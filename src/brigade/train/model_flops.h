#pragma once
// The FLOPs a training step needs by the model's arithmetic, the numerator of MFU (model FLOPs
// utilisation), counted as PaLM does (Chowdhery et al. 2022, appendix B): per token, 6 x the
// matmul parameters that act on it (forward 2, backward 4) plus 12 L T C for attention's score
// and value products over the full T x T (causal masking not discounted). The matmul parameters
// are the blocks' c_attn, attn.c_proj and MLP weights and the tied head (V x C); embeddings
// lookups and biases are not matmuls. A mixture-of-experts block counts its router and the
// top_k experts a token goes to. The MLP classifier: 6 x parameters per example; the CNN: 6 x
// the multiply-adds of its weights and biases at every output position (cnn_classifier.h).
// Recomputation is not counted: it is work the hardware does, not the model (that would be HFU).
#include "brigade/runtime/config.h"

namespace brigade {

// Training FLOPs per example (a sequence of model.seq_len tokens, or one image).
double train_flops_per_example(const ModelConfig& model, int64_t num_params);

}  // namespace brigade
