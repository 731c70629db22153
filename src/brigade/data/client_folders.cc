#include "brigade/data/client_folders.h"

#include <cstring>

#include "brigade/base/crc32c.h"
#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/data/text_corpus.h"

namespace brigade {

namespace {

// Documents joined by kDocSeparator, so parse_paragraphs splits them again.
void append_document(std::string& text, const std::string& doc) {
  if (!text.empty()) text += kDocSeparator;
  text += doc;
}

}  // namespace

std::string client_folder_name(int64_t k) {
  return "client_" + std::to_string(k);
}

LabelledImages read_fashion_mnist_train(const std::string& dir) {
  const std::string images_path = dir + "/train-images-idx3-ubyte.gz";
  const std::string labels_path = dir + "/train-labels-idx1-ubyte.gz";
  LabelledImages out;
  out.images = read_idx_images(images_path);
  out.labels = read_idx_labels(labels_path);
  out.num_classes = 10;
  if (out.images.count == 0) throw IoError(images_path + ": holds no images (the header says 0)");
  if (out.images.rows != 28 || out.images.cols != 28) {
    throw IoError(images_path + ": images are " + std::to_string(out.images.rows) + "x" +
                  std::to_string(out.images.cols) + ", Fashion-MNIST's are 28x28");
  }
  if (static_cast<int64_t>(out.labels.size()) != out.images.count) {
    throw IoError(labels_path + ": " + std::to_string(out.labels.size()) + " labels for " +
                  std::to_string(out.images.count) + " images in " + images_path);
  }
  for (size_t i = 0; i < out.labels.size(); ++i) {
    if (out.labels[i] >= out.num_classes) {
      throw IoError(labels_path + ": label " + std::to_string(out.labels[i]) + " at index " +
                    std::to_string(i) + " is not in [0, 10)");
    }
  }
  return out;
}

std::vector<ClientRecord> write_image_clients(const std::string& out_dir,
                                              const LabelledImages& data,
                                              const Partition& partition) {
  const size_t image_bytes = static_cast<size_t>(data.images.rows * data.images.cols);
  std::vector<ClientRecord> records;
  for (size_t k = 0; k < partition.clients.size(); ++k) {
    const std::vector<int64_t>& indices = partition.clients[k];
    IdxImages images;
    images.count = static_cast<int64_t>(indices.size());
    images.rows = data.images.rows;
    images.cols = data.images.cols;
    images.pixels.resize(indices.size() * image_bytes);
    std::vector<int32_t> labels(indices.size());
    for (size_t i = 0; i < indices.size(); ++i) {
      const size_t src = static_cast<size_t>(indices[i]);
      std::memcpy(images.pixels.data() + i * image_bytes,
                  data.images.pixels.data() + src * image_bytes, image_bytes);
      labels[i] = data.labels[src];
    }
    ClientRecord r;
    r.name = client_folder_name(static_cast<int64_t>(k));
    r.count = images.count;
    r.label_histogram = label_histogram(data.labels, indices, data.num_classes);
    const std::string dir = out_dir + "/" + r.name;
    make_dirs(dir);
    r.files[kClientImagesFile] = write_idx_images(dir + "/" + kClientImagesFile, images);
    r.files[kClientLabelsFile] = write_idx_labels(dir + "/" + kClientLabelsFile, labels);
    records.push_back(std::move(r));
  }
  return records;
}

std::vector<ClientRecord> write_text_clients(const std::string& out_dir,
                                             const std::vector<std::string>& docs,
                                             const Partition& partition) {
  std::vector<ClientRecord> records;
  for (size_t k = 0; k < partition.clients.size(); ++k) {
    std::string text;
    for (int64_t i : partition.clients[k]) append_document(text, docs[static_cast<size_t>(i)]);
    ClientRecord r;
    r.name = client_folder_name(static_cast<int64_t>(k));
    r.count = static_cast<int64_t>(partition.clients[k].size());
    const std::string dir = out_dir + "/" + r.name;
    make_dirs(dir);
    write_file_durable(dir + "/" + kClientTextFile, text);
    r.files[kClientTextFile] = {static_cast<int64_t>(text.size()), crc32c(text)};
    records.push_back(std::move(r));
  }
  return records;
}

WrittenFile write_validation_text(const std::string& out_dir,
                                  const std::vector<std::string>& docs) {
  std::string text;
  for (const std::string& doc : docs) append_document(text, doc);
  write_file_durable(out_dir + "/" + kValidationTextFile, text);
  return {static_cast<int64_t>(text.size()), crc32c(text)};
}

}  // namespace brigade
