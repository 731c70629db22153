#include "brigade/data/loader.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"

namespace brigade {

TokenDataset::TokenDataset(std::vector<int32_t> tokens, int64_t seq_len)
    : tokens_(std::move(tokens)), seq_len_(seq_len) {
  const int64_t n = static_cast<int64_t>(tokens_.size());
  if (seq_len <= 0 || n < seq_len + 1) {
    throw ConfigError("token dataset: seq_len = " + std::to_string(seq_len) + " needs > 0 and " +
                      "at least seq_len + 1 tokens, have " + std::to_string(n));
  }
  num_examples_ = (n - 1) / seq_len;
}

Batch make_sequence_batch(int64_t max_batch, int64_t seq_len) {
  BRIGADE_CHECK(max_batch > 0) << max_batch;
  Batch b;
  b.tokens.assign(static_cast<size_t>(max_batch * seq_len), 0);
  b.targets.assign(static_cast<size_t>(max_batch * seq_len), 0);
  b.seq_len = seq_len;
  return b;
}

void check_sequence_batch(const Batch& batch, int64_t n, int64_t seq_len) {
  BRIGADE_CHECK(n >= 0 && static_cast<int64_t>(batch.tokens.size()) >= n * seq_len &&
                static_cast<int64_t>(batch.targets.size()) >= n * seq_len)
      << "batch made for fewer than " << n << " examples of length " << seq_len;
}

Batch TokenDataset::make_batch(int64_t max_batch) const {
  return make_sequence_batch(max_batch, seq_len_);
}

void TokenDataset::fill(Batch& batch, const int64_t* example_ids, int64_t n) const {
  const int64_t t = seq_len_;
  check_sequence_batch(batch, n, t);
  for (int64_t b = 0; b < n; ++b) {
    const int64_t id = example_ids[b];
    BRIGADE_CHECK(id >= 0 && id < num_examples_) << "example " << id << " of " << num_examples_;
    const int32_t* src = tokens_.data() + id * t;
    std::memcpy(batch.tokens.data() + b * t, src, sizeof(int32_t) * t);
    std::memcpy(batch.targets.data() + b * t, src + 1, sizeof(int32_t) * t);
  }
  batch.size = n;
  batch.seq_len = t;
}

ImageDataset::ImageDataset(std::vector<float> features, std::vector<int32_t> labels, int64_t dim)
    : features_(std::move(features)), labels_(std::move(labels)), dim_(dim) {
  if (labels_.empty() || dim <= 0 ||
      static_cast<int64_t>(features_.size()) != static_cast<int64_t>(labels_.size()) * dim) {
    throw ConfigError("image dataset: " + std::to_string(features_.size()) + " features for " +
                      std::to_string(labels_.size()) + " labels of dim " + std::to_string(dim) +
                      " (need N > 0, dim > 0, features = N * dim)");
  }
}

ImageDataset::ImageDataset(ImageSet set)
    : ImageDataset(std::move(set.features), std::move(set.labels), set.dim) {}

Batch ImageDataset::make_batch(int64_t max_batch) const {
  BRIGADE_CHECK(max_batch > 0) << max_batch;
  Batch b;
  b.features.assign(static_cast<size_t>(max_batch * dim_), 0.0f);
  b.targets.assign(static_cast<size_t>(max_batch), 0);
  return b;
}

void ImageDataset::fill(Batch& batch, const int64_t* example_ids, int64_t n) const {
  BRIGADE_CHECK(n >= 0 && static_cast<int64_t>(batch.features.size()) >= n * dim_ &&
                static_cast<int64_t>(batch.targets.size()) >= n)
      << "batch made for fewer than " << n << " examples of dim " << dim_;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t id = example_ids[b];
    BRIGADE_CHECK(id >= 0 && id < size()) << "example " << id << " of " << size();
    std::memcpy(batch.features.data() + b * dim_, features_.data() + id * dim_,
                sizeof(float) * dim_);
    batch.targets[b] = labels_[id];
  }
  batch.size = n;
}

namespace {
SamplerOptions with_size(SamplerOptions options, int64_t n) {
  options.num_examples = n;
  return options;
}
}  // namespace

DataLoader::DataLoader(const Dataset& dataset, SamplerOptions options)
    : dataset_(dataset),
      sampler_(with_size(options, dataset.size())),
      ids_(static_cast<size_t>(options.micro_batch)) {}

void DataLoader::next(Batch& batch, int64_t step, int64_t micro_step) {
  next(batch, step, micro_step, sampler_.options().dp_rank);
}

void DataLoader::next(Batch& batch, int64_t step, int64_t micro_step, int64_t dp_rank) {
  sampler_.micro_batch_examples(step, micro_step, dp_rank, ids_.data());
  dataset_.fill(batch, ids_.data(), micro_batch());
}

EvalIterator::EvalIterator(const Dataset& dataset, int64_t micro_batch, int64_t max_batches)
    : dataset_(dataset), micro_batch_(micro_batch) {
  if (micro_batch <= 0) {
    throw ConfigError("eval micro_batch = " + std::to_string(micro_batch) + ": must be > 0");
  }
  const int64_t all = (dataset.size() + micro_batch - 1) / micro_batch;
  num_batches_ = max_batches > 0 ? std::min(max_batches, all) : all;
  ids_.resize(static_cast<size_t>(micro_batch));
}

void EvalIterator::fill(Batch& batch, int64_t k) {
  BRIGADE_CHECK(k >= 0 && k < num_batches_) << "eval batch " << k << " of " << num_batches_;
  const int64_t first = k * micro_batch_;
  const int64_t n = std::min(micro_batch_, dataset_.size() - first);
  for (int64_t i = 0; i < n; ++i) ids_[i] = first + i;
  dataset_.fill(batch, ids_.data(), n);
}

bool EvalIterator::next(Batch& batch) {
  if (cursor_ >= num_batches_) return false;
  fill(batch, cursor_++);
  return true;
}

}  // namespace brigade
