#pragma once
// The flat parameter space. Every parameter of a model lives in one contiguous f32 buffer;
// gradients and optimizer state live in twin buffers of the same length. A ParamSpec names
// one tensor, its shape, where it starts in the flat buffer, how it is initialised and how
// it splits under tensor parallelism. Every distributed mechanism (DP buckets, ZeRO shards,
// checkpoint shards, compression chunks) works on ranges [offset, offset + numel) of it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace brigade {

// kUniform draws from [-init_bound, init_bound): PyTorch's default for Linear and Conv2d
// weights and biases, with bound 1/sqrt(fan_in).
enum class Init { kZeros, kOnes, kNormal, kUniform };

// How a tensor is cut across tp ranks (Megatron): kDim0 splits the output features of a
// column-parallel weight (and its bias) or the rows of the vocab-parallel embedding, kDim1 the
// input features of a row-parallel weight.
enum class TpSplit { kReplicated, kDim0, kDim1 };

struct ParamSpec {
  std::string name;            // GPT-2 naming: "h.3.attn.c_attn.weight"
  std::vector<int64_t> shape;  // row-major; weights are (out_features, in_features)
  int64_t offset = 0;          // first element in the flat buffer
  int64_t numel = 0;
  Init init = Init::kNormal;
  float init_std = 0.02f;    // for Init::kNormal
  float init_bound = 0.0f;   // for Init::kUniform
  bool weight_decay = true;  // AdamW decays matrices, not biases or norm gains
  TpSplit tp_split = TpSplit::kReplicated;
  // Tensor parallelism. With tp_size > 1 and a split, this tensor is shard tp_rank of the
  // tensor of shape full_shape (the tp=1 tensor). The split dim consists of tp_parts equal
  // blocks (3 for c_attn: q, k, v), each cut into tp_size pieces; the shard is the rank's piece
  // of every block, concatenated. Rows of dim 0 at or past full_shape[0] are padding (a vocab
  // padded to a multiple of tp): initialised to zero, absent from the full tensor.
  std::vector<int64_t> full_shape = {};  // empty: the tensor is whole (shape)
  int tp_rank = 0;
  int tp_size = 1;
  int tp_parts = 1;

  bool is_tp_shard() const { return tp_size > 1 && tp_split != TpSplit::kReplicated; }
  // Flat index in the full tensor of this tensor's element `local`, or -1 for padding.
  int64_t full_index(int64_t local) const;
  int64_t full_numel() const;
};

// An ordered table of ParamSpecs. Parameters are laid out in the order they are added,
// which models choose to be forward order, so backward finishes ranges from the end.
class ParamLayout {
 public:
  // Appends a tensor and returns its offset. Names must be unique.
  int64_t add(ParamSpec spec);

  const std::vector<ParamSpec>& specs() const { return specs_; }
  int64_t total() const { return total_; }
  const ParamSpec& at(const std::string& name) const;  // throws std::out_of_range
  const ParamSpec* find(const std::string& name) const;

  // Writes the initial value of every parameter into params (length total()). Values depend
  // only on (seed, name, element index), never on the layout of other tensors; a tp shard gets
  // the values of its elements' indices in the full tensor, so tp=k starts from the tp=1 weights.
  void initialize(float* params, uint64_t seed) const;

 private:
  std::vector<ParamSpec> specs_;
  int64_t total_ = 0;
};

// The tensors of layout that lie wholly in the flat range [begin, end), in order, re-laid from
// offset 0: they describe a buffer that starts at flat element begin when they are a contiguous
// run from it (a range cut at tensor boundaries).
ParamLayout tensors_within(const ParamLayout& layout, int64_t begin, int64_t end);

std::string shape_string(const std::vector<int64_t>& shape);  // "(768, 2304)"

}  // namespace brigade
