#include "brigade/ckpt/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/json_limits.h"
#include "brigade/tensor/bf16.h"

namespace brigade {

// The format is little-endian; we copy bytes straight between memory and file.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

namespace {

struct DtypeEntry {
  StDtype dtype;
  const char* name;
  int64_t size;
};

constexpr std::array<DtypeEntry, 15> kDtypes = {{
    {StDtype::kBool, "BOOL", 1},
    {StDtype::kU8, "U8", 1},
    {StDtype::kI8, "I8", 1},
    {StDtype::kF8E5M2, "F8_E5M2", 1},
    {StDtype::kF8E4M3, "F8_E4M3", 1},
    {StDtype::kI16, "I16", 2},
    {StDtype::kU16, "U16", 2},
    {StDtype::kF16, "F16", 2},
    {StDtype::kBF16, "BF16", 2},
    {StDtype::kI32, "I32", 4},
    {StDtype::kU32, "U32", 4},
    {StDtype::kF32, "F32", 4},
    {StDtype::kF64, "F64", 8},
    {StDtype::kI64, "I64", 8},
    {StDtype::kU64, "U64", 8},
}};

const DtypeEntry& entry(StDtype dtype) {
  return kDtypes[static_cast<size_t>(dtype)];
}

// product(shape) * elem_size, or nullopt on a negative dimension or int64 overflow.
std::optional<int64_t> checked_nbytes(const std::vector<int64_t>& shape, int64_t elem_size) {
  int64_t n = elem_size;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

// A JSON value that must be an integer in [0, INT64_MAX].
std::optional<int64_t> as_index(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i >= 0) return i;
  }
  return std::nullopt;
}

// IEEE binary16 -> binary32, exact.
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float mag = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -mag : mag;
  }
  const uint32_t bits = exp == 0x1f ? (sign | 0x7f800000u | (mant << 13))
                                    : (sign | ((exp + 112) << 23) | (mant << 13));
  return std::bit_cast<float>(bits);
}

}  // namespace

int64_t st_dtype_size(StDtype dtype) {
  return entry(dtype).size;
}
const char* st_dtype_name(StDtype dtype) {
  return entry(dtype).name;
}

std::optional<StDtype> parse_st_dtype(std::string_view name) {
  for (const DtypeEntry& e : kDtypes) {
    if (name == e.name) return e.dtype;
  }
  return std::nullopt;
}

int64_t StTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated not to overflow when the file was opened
  return n;
}

// ---------------------------------------------------------------------------------------------
// Writing

std::string safetensors_header(std::span<const StTensorView> tensors, const StMetadata& metadata) {
  // ordered_json keeps insertion order, so the bytes match HF's serde output exactly.
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = std::move(m);
  }
  std::set<std::string_view> seen;
  int64_t offset = 0;
  for (const StTensorView& t : tensors) {
    BRIGADE_CHECK(!t.name.empty() && t.name != "__metadata__")
        << "bad tensor name '" << t.name << "'";
    BRIGADE_CHECK(seen.insert(t.name).second) << "duplicate tensor name " << t.name;
    const auto nbytes = checked_nbytes(t.shape, st_dtype_size(t.dtype));
    BRIGADE_CHECK(nbytes && *nbytes == t.nbytes)
        << "tensor " << t.name << ": nbytes " << t.nbytes << " does not match its shape and dtype";
    BRIGADE_CHECK(t.data != nullptr || t.nbytes == 0) << "tensor " << t.name << " has no data";
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = st_dtype_name(t.dtype);
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + t.nbytes};
    h[t.name] = std::move(e);
    offset += t.nbytes;
  }
  std::string json;
  try {
    json = h.dump();
  } catch (const nlohmann::json::exception& e) {
    BRIGADE_CHECK(false) << "cannot encode safetensors header (tensor or metadata string is not "
                            "valid UTF-8?): "
                         << e.what();
  }
  json.append((8 - json.size() % 8) % 8, ' ');  // aligns the data section to 8 bytes
  std::string out(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json;
}

FileDigest write_safetensors(const std::string& path, std::span<const StTensorView> tensors,
                             const StMetadata& metadata) {
  // HF's order: widest dtype first (so every tensor starts aligned to its element size),
  // then by name.
  std::vector<StTensorView> sorted(tensors.begin(), tensors.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const StTensorView& a, const StTensorView& b) {
    if (a.dtype != b.dtype) return a.dtype > b.dtype;
    return a.name < b.name;
  });
  const std::string header = safetensors_header(sorted, metadata);
  DurableFileWriter out(path);
  out.append(header);
  for (const StTensorView& t : sorted) out.append(t.data, static_cast<size_t>(t.nbytes));
  return out.close();
}

// ---------------------------------------------------------------------------------------------
// Reading

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept {
  *this = std::move(other);
}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_start_ = other.data_start_;
    names_ = std::move(other.names_);
    infos_ = std::move(other.infos_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto invalid = [&](const std::string& what) {
    return IoError("invalid safetensors file " + path + ": " + what);
  };
  SafetensorsFile f;
  f.path_ = path;
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd_ < 0) throw IoError("cannot open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(f.fd_, &st) != 0) throw IoError("cannot stat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw invalid("not a regular file");
  const int64_t file_size = st.st_size;
  if (file_size < 8) {
    throw invalid("file has " + std::to_string(file_size) +
                  " bytes, fewer than the 8-byte header length");
  }

  uint64_t n = 0;
  f.pread_exact(&n, 8, 0);
  if (n > static_cast<uint64_t>(kMaxHeaderBytes)) {
    throw invalid("header length " + std::to_string(n) + " exceeds the limit of " +
                  std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (static_cast<int64_t>(n) > file_size - 8) {
    throw invalid("header length " + std::to_string(n) + " exceeds the " +
                  std::to_string(file_size - 8) + " bytes after the length field");
  }
  std::string header(n, '\0');
  f.pread_exact(header.data(), static_cast<int64_t>(n), 8);
  f.data_start_ = 8 + static_cast<int64_t>(n);
  const int64_t data_size = file_size - f.data_start_;

  // Bounded in depth (a header is 3 levels deep) and valid UTF-8, or an IoError naming the file.
  const nlohmann::json j =
      parse_json_bounded(header, "invalid safetensors file " + path + ": header",
                         JsonLimits{.max_bytes = kMaxHeaderBytes, .max_depth = kMaxHeaderDepth});
  if (!j.is_object()) throw invalid("header is not a JSON object");

  std::vector<std::pair<std::string, StTensorInfo>> tensors;
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) throw invalid("__metadata__ is not an object");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) {
          throw invalid("__metadata__ value of " + json_excerpt(k) + " is not a string");
        }
        f.metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    // A copy of the quoted name: clang before 16 cannot capture a structured binding.
    const std::string quoted = json_excerpt(name);
    auto bad = [&](const std::string& what) { return invalid("tensor " + quoted + ": " + what); };
    if (!v.is_object()) throw bad("entry is not an object");
    StTensorInfo info;
    const auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) throw bad("missing or non-string dtype");
    const auto dtype = parse_st_dtype(dt->get<std::string>());
    if (!dtype) throw bad("unknown dtype " + json_excerpt(*dt));
    info.dtype = *dtype;
    const auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array()) throw bad("missing or non-array shape");
    for (const auto& d : *sh) {
      const auto dim = as_index(d);
      if (!dim) throw bad("shape entry " + json_excerpt(d) + " is not a non-negative integer");
      info.shape.push_back(*dim);
    }
    const auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2) {
      throw bad("data_offsets is not an array of two integers");
    }
    const auto begin = as_index((*off)[0]);
    const auto end = as_index((*off)[1]);
    if (!begin || !end || *begin > *end)
      throw bad("data_offsets " + json_excerpt(*off) + " are invalid");
    info.begin = *begin;
    info.end = *end;
    if (info.end > data_size) {
      throw bad("data_offsets " + json_excerpt(*off) + " run past the end of the data section (" +
                std::to_string(data_size) + " bytes; file truncated?)");
    }
    const auto nbytes = checked_nbytes(info.shape, st_dtype_size(info.dtype));
    if (!nbytes) throw bad("shape " + json_excerpt(*sh) + " overflows");
    if (*nbytes != info.end - info.begin) {
      throw bad("shape " + json_excerpt(*sh) + " of " + st_dtype_name(info.dtype) + " needs " +
                std::to_string(*nbytes) + " bytes but data_offsets " + json_excerpt(*off) +
                " span " + std::to_string(info.end - info.begin));
    }
    tensors.emplace_back(name, std::move(info));
  }

  // The tensors must tile [0, data_size) exactly: no overlap, no gap, nothing after the last.
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    return std::pair(a.second.begin, a.second.end) < std::pair(b.second.begin, b.second.end);
  });
  int64_t expected = 0;
  std::string previous = "the start of the data section";
  for (const auto& [name, info] : tensors) {
    if (info.begin != expected) {
      throw invalid("tensor " + json_excerpt(name) + " starts at " + std::to_string(info.begin) +
                    " but " + previous + " ends at " + std::to_string(expected) +
                    (info.begin < expected ? " (overlap)" : " (gap)"));
    }
    expected = info.end;
    previous = "tensor " + json_excerpt(name);
  }
  if (expected != data_size) {
    throw invalid("tensors cover " + std::to_string(expected) + " bytes but the data section has " +
                  std::to_string(data_size) + " (trailing bytes)");
  }
  for (auto& [name, info] : tensors) {
    f.names_.push_back(name);
    f.infos_.emplace(name, std::move(info));
  }
  return f;
}

const StTensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = infos_.find(name);
  if (it == infos_.end()) throw IoError("tensor '" + name + "' not found in " + path_);
  return it->second;
}

void SafetensorsFile::pread_exact(void* out, int64_t nbytes, int64_t offset) const {
  auto* p = static_cast<char*>(out);
  while (nbytes > 0) {
    const ssize_t r = ::pread(fd_, p, static_cast<size_t>(nbytes), offset);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw IoError("cannot read " + path_ + ": " + std::strerror(errno));
    }
    if (r == 0) throw IoError("unexpected end of file in " + path_ + " (truncated while open?)");
    p += r;
    nbytes -= r;
    offset += r;
  }
}

void SafetensorsFile::read_raw(const std::string& name, void* out, int64_t nbytes) const {
  const StTensorInfo& t = info(name);
  if (nbytes != t.end - t.begin) {
    throw IoError("tensor '" + name + "' in " + path_ + " has " + std::to_string(t.end - t.begin) +
                  " bytes, caller expects " + std::to_string(nbytes));
  }
  pread_exact(out, nbytes, data_start_ + t.begin);
}

void SafetensorsFile::read_raw_range(const std::string& name, void* out, int64_t offset,
                                     int64_t nbytes) const {
  const StTensorInfo& t = info(name);
  if (offset < 0 || nbytes < 0 || offset > t.end - t.begin || nbytes > t.end - t.begin - offset) {
    throw IoError("bytes [" + std::to_string(offset) + ", +" + std::to_string(nbytes) +
                  ") are outside tensor '" + name + "' in " + path_ + " (" +
                  std::to_string(t.end - t.begin) + " bytes)");
  }
  pread_exact(out, nbytes, data_start_ + t.begin + offset);
}

void SafetensorsFile::read_f32(const std::string& name, float* out, int64_t count) const {
  const StTensorInfo& t = info(name);
  const int64_t numel = t.numel();
  if (count != numel) {
    throw IoError("tensor '" + name + "' in " + path_ + " has " + std::to_string(numel) +
                  " elements, caller expects " + std::to_string(count));
  }
  if (t.dtype == StDtype::kF32) {
    pread_exact(out, numel * 4, data_start_ + t.begin);
    return;
  }
  if (t.dtype != StDtype::kBF16 && t.dtype != StDtype::kF16) {
    throw IoError("tensor '" + name + "' in " + path_ + " has dtype " + st_dtype_name(t.dtype) +
                  ", which cannot be read as F32");
  }
  // Read the 2-byte values into the upper half of `out` and widen front to back: element i is
  // loaded before out[i] is stored, and out[i] never reaches a later source element.
  auto* bytes = reinterpret_cast<unsigned char*>(out);
  unsigned char* src = bytes + 2 * numel;
  pread_exact(src, numel * 2, data_start_ + t.begin);
  for (int64_t i = 0; i < numel; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    const float v = t.dtype == StDtype::kBF16 ? bf16_to_float(h) : half_to_float(h);
    std::memcpy(bytes + 4 * i, &v, 4);
  }
}

}  // namespace brigade
