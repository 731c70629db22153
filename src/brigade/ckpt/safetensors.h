#pragma once
// The safetensors format (Hugging Face), used for checkpoint data files and model export:
//
//   [8 bytes]  N, little-endian uint64: length of the header
//   [N bytes]  UTF-8 JSON object, padded with spaces to a multiple of 8:
//              {"__metadata__": {"key": "value", ...},            (optional, strings only)
//               "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   [rest]     raw little-endian, row-major tensor data; offsets are relative to its start
//
// The writer produces the same bytes as HF's `safetensors.serialize` (tensors sorted by dtype,
// widest first so every tensor stays aligned, then by name; keys in HF's order). The reader is
// as strict as HF's: tensors must tile the data section exactly, from 0 to the end of the file,
// with no gap or overlap. It trusts nothing in the file until it has been checked.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "brigade/base/file_io.h"

namespace brigade {

// Element types of the format (HF's names). Order = HF's, by increasing alignment.
enum class StDtype {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64
};

int64_t st_dtype_size(StDtype dtype);      // bytes per element
const char* st_dtype_name(StDtype dtype);  // "F32", "BF16", "F8_E4M3", ...
std::optional<StDtype> parse_st_dtype(std::string_view name);

// A tensor to write: a view of caller memory, which must stay valid during the write.
struct StTensorView {
  std::string name;
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;  // row-major; {} is a scalar
  const void* data = nullptr;
  int64_t nbytes = 0;  // must equal product(shape) * st_dtype_size(dtype)
};

using StMetadata = std::map<std::string, std::string>;

// The header bytes (length prefix + padded JSON) for `tensors` in the order given, with
// data_offsets assigned contiguously. Exposed so shard writers can size files up front.
std::string safetensors_header(std::span<const StTensorView> tensors, const StMetadata& metadata);

// Writes a safetensors file durably (fsync) and returns its size and CRC-32. Names must be
// unique, non-empty and not "__metadata__"; views must be consistent (programmer errors).
// Throws IoError on any file-system failure, leaving a partial file behind.
FileDigest write_safetensors(const std::string& path, std::span<const StTensorView> tensors,
                             const StMetadata& metadata = {});

// Where a tensor lives in a file. begin/end are offsets into the data section.
struct StTensorInfo {
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t numel() const;
};

// An open, validated safetensors file. Reads data on demand with pread (thread-safe); the
// header is parsed once.
class SafetensorsFile {
 public:
  // Largest header accepted (HF's limit).
  static constexpr int64_t kMaxHeaderBytes = 100'000'000;
  // Deepest nesting accepted in the header (a valid one has 3 levels: header, entry, shape).
  static constexpr int kMaxHeaderDepth = 16;

  // Opens and validates the whole header against the file size. Throws IoError naming the path
  // and what is wrong.
  static SafetensorsFile open(const std::string& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<std::string>& names() const { return names_; }  // in data order
  bool contains(const std::string& name) const { return infos_.count(name) != 0; }
  const StTensorInfo& info(const std::string& name) const;  // throws IoError if absent
  const StMetadata& metadata() const { return metadata_; }

  // Copies the raw bytes of a tensor; nbytes must equal its size. Throws IoError.
  void read_raw(const std::string& name, void* out, int64_t nbytes) const;
  // Copies bytes [offset, offset + nbytes) of a tensor's data (a part of a shard piece).
  // Throws IoError if the range is not inside the tensor or the read fails.
  void read_raw_range(const std::string& name, void* out, int64_t offset, int64_t nbytes) const;
  // Reads a tensor as f32. F32 is copied; BF16 and F16 are widened. count must equal the
  // number of elements. Throws IoError on a mismatch, another dtype or a failed read.
  void read_f32(const std::string& name, float* out, int64_t count) const;

 private:
  SafetensorsFile() = default;
  void pread_exact(void* out, int64_t nbytes, int64_t offset) const;

  std::string path_;
  int fd_ = -1;
  int64_t data_start_ = 0;  // 8 + N
  std::vector<std::string> names_;
  std::map<std::string, StTensorInfo> infos_;
  StMetadata metadata_;
};

}  // namespace brigade
