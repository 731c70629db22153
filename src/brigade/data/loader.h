#pragma once
// Datasets and loaders that fill a Batch in place. Buffers are sized once (make_batch); after
// that, filling a micro-batch allocates nothing.
//
//   TokenDataset  a token stream cut into windows: example i is tokens[i*T, i*T + T + 1);
//                 inputs are its first T tokens, targets the last T (next-token prediction).
//   ImageDataset  (features, label) pairs, e.g. Fashion-MNIST.
//   DataLoader    Dataset + Sampler: this rank's micro-batch of (step, micro_step).
//   EvalIterator  the first K batches of the validation set in index order, for every rank
//                 the same (a DP run may give batch k to rank k % dp_size).
#include <cstdint>
#include <vector>

#include "brigade/data/idx_reader.h"
#include "brigade/data/sampler.h"
#include "brigade/model/batch.h"

namespace brigade {

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of examples, > 0.
  virtual int64_t size() const = 0;

  // A batch whose buffers hold up to max_batch examples (this allocates; do it once).
  virtual Batch make_batch(int64_t max_batch) const = 0;

  // Writes examples ids[0..n) into batch, sets batch.size = n. Each id in [0, size()); n at most
  // the max_batch the batch was made for. No allocation.
  virtual void fill(Batch& batch, const int64_t* example_ids, int64_t n) const = 0;

  // Whether examples hold different numbers of targets >= 0 (masked targets: instruction data),
  // so that a step's loss must weight micro-batches by valid_targets to be the mean over the
  // global batch's targets whatever the number of ranks.
  virtual bool masks_targets() const { return false; }
  // Targets >= 0 of example id; only meaningful when masks_targets().
  virtual int64_t valid_targets(int64_t /*id*/) const { return 1; }
};

// The batch of a sequence dataset (tokens and targets, seq_len of each per example) for up to
// max_batch examples; and the check of fill() that `batch` was made for n such examples.
Batch make_sequence_batch(int64_t max_batch, int64_t seq_len);
void check_sequence_batch(const Batch& batch, int64_t n, int64_t seq_len);

class TokenDataset final : public Dataset {
 public:
  // N = (tokens.size() - 1) / seq_len windows; a tail shorter than a window is unused.
  // ConfigError if seq_len <= 0 or there are fewer than seq_len + 1 tokens.
  TokenDataset(std::vector<int32_t> tokens, int64_t seq_len);

  int64_t size() const override { return num_examples_; }
  int64_t seq_len() const { return seq_len_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

  // batch.tokens and batch.targets are (max_batch, T).
  Batch make_batch(int64_t max_batch) const override;
  void fill(Batch& batch, const int64_t* example_ids, int64_t n) const override;

 private:
  std::vector<int32_t> tokens_;
  int64_t seq_len_;
  int64_t num_examples_;
};

class ImageDataset final : public Dataset {
 public:
  // features is (N, dim), labels (N). ConfigError if N == 0, dim <= 0 or the sizes disagree.
  ImageDataset(std::vector<float> features, std::vector<int32_t> labels, int64_t dim);
  explicit ImageDataset(ImageSet set);

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  int64_t dim() const { return dim_; }

  // batch.features is (max_batch, dim), batch.targets (max_batch).
  Batch make_batch(int64_t max_batch) const override;
  void fill(Batch& batch, const int64_t* example_ids, int64_t n) const override;

 private:
  std::vector<float> features_;
  std::vector<int32_t> labels_;
  int64_t dim_;
};

class DataLoader {
 public:
  // options.num_examples is taken from the dataset, which must outlive the loader.
  DataLoader(const Dataset& dataset, SamplerOptions options);

  const Sampler& sampler() const { return sampler_; }
  int64_t micro_batch() const { return sampler_.options().micro_batch; }

  // A batch sized for one micro-batch of this loader.
  Batch make_batch() const { return dataset_.make_batch(micro_batch()); }

  // Fills batch with this rank's micro-batch `micro_step` of `step` (see sampler.h).
  void next(Batch& batch, int64_t step, int64_t micro_step);
  // The same of rank dp_rank's part of `step` (see Sampler::micro_batch_examples).
  void next(Batch& batch, int64_t step, int64_t micro_step, int64_t dp_rank);

 private:
  const Dataset& dataset_;
  Sampler sampler_;
  std::vector<int64_t> ids_;  // scratch, micro_batch long
};

class EvalIterator {
 public:
  // Batch k holds examples [k*micro_batch, min((k+1)*micro_batch, N)); there are
  // min(max_batches, ceil(N / micro_batch)) batches (max_batches <= 0: all). The dataset must
  // outlive the iterator. ConfigError if micro_batch <= 0.
  EvalIterator(const Dataset& dataset, int64_t micro_batch, int64_t max_batches);

  int64_t num_batches() const { return num_batches_; }
  Batch make_batch() const { return dataset_.make_batch(micro_batch_); }

  // Fills batch k (0 <= k < num_batches()); the last batch of the set may be partial.
  void fill(Batch& batch, int64_t k);

  // Sequential use: fills the next batch and returns true, or returns false after the last.
  bool next(Batch& batch);
  void reset() { cursor_ = 0; }

 private:
  const Dataset& dataset_;
  int64_t micro_batch_;
  int64_t num_batches_;
  int64_t cursor_ = 0;
  std::vector<int64_t> ids_;
};

}  // namespace brigade
