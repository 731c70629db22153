#pragma once
// The folders `brigade partition` writes, one per federated client, each readable by the
// loader that reads the whole data set: an image client holds train-images-idx3-ubyte.gz and
// train-labels-idx1-ubyte.gz (load_fashion_mnist(dir, "train") reads it), a text client holds
// train.txt (its documents joined by kDocSeparator, so parse_paragraphs splits them again).
// The client's examples keep their source order (Partition's indices are ascending).
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "brigade/data/idx_reader.h"
#include "brigade/data/idx_writer.h"
#include "brigade/data/partition.h"

namespace brigade {

inline constexpr const char* kClientImagesFile = "train-images-idx3-ubyte.gz";
inline constexpr const char* kClientLabelsFile = "train-labels-idx1-ubyte.gz";
inline constexpr const char* kClientTextFile = "train.txt";
// Text only: the documents kept out of every client, the coordinator's held-out test set.
inline constexpr const char* kValidationTextFile = "validation.txt";

// "client_<k>".
std::string client_folder_name(int64_t k);

struct ClientRecord {
  std::string name;                          // client_<k>
  int64_t count = 0;                         // examples (documents for text)
  std::vector<int64_t> label_histogram;      // examples per class; empty for text
  std::map<std::string, WrittenFile> files;  // file name -> size and CRC-32C
};

// A labelled image set as its IDX files hold it (uint8 pixels).
struct LabelledImages {
  IdxImages images;
  std::vector<int32_t> labels;
  int32_t num_classes = 0;
};

// Reads Fashion-MNIST's "train" split from dir with the checks of load_fashion_mnist (IoError
// naming the file: missing, corrupt, not 28x28, counts differ, a label outside [0, 10)).
LabelledImages read_fashion_mnist_train(const std::string& dir);

// Writes out_dir/client_<k>/ for every client of the partition.
std::vector<ClientRecord> write_image_clients(const std::string& out_dir,
                                              const LabelledImages& data,
                                              const Partition& partition);

// Writes out_dir/client_<k>/train.txt for every client of the partition of docs.
std::vector<ClientRecord> write_text_clients(const std::string& out_dir,
                                             const std::vector<std::string>& docs,
                                             const Partition& partition);

// Writes out_dir/validation.txt: the documents joined as a client's train.txt joins its own.
WrittenFile write_validation_text(const std::string& out_dir, const std::vector<std::string>& docs);

}  // namespace brigade
