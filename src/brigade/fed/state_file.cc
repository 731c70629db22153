#include "brigade/fed/state_file.h"

#include <fmt/format.h>

#include <cstring>

#include "brigade/base/crc32c.h"
#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/fed/fed_message.h"

namespace brigade {

namespace {

constexpr uint32_t kStateMagic = 0x31534642;  // "BFS1"
constexpr uint32_t kStateVersion = 1;
constexpr uint32_t kMaxEntries = 64;
constexpr uint32_t kMaxName = 128;

template <typename T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void put_name(std::string& out, const std::string& name) {
  put(out, static_cast<uint32_t>(name.size()));
  out += name;
}

// Reads fields front to back, refusing to read past the end.
class Reader {
 public:
  Reader(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  template <typename T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof value), sizeof value);
    return value;
  }
  std::string name() {
    const auto size = get<uint32_t>();
    if (size == 0 || size > kMaxName) fail(fmt::format("a name of {} bytes", size));
    return std::string(take(size), size);
  }
  const char* take(size_t n) {
    if (n > bytes_.size() - at_) fail("truncated");
    const char* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }
  size_t at() const { return at_; }
  size_t left() const { return bytes_.size() - at_; }
  [[noreturn]] void fail(const std::string& why) const {
    throw CheckpointError(fmt::format("{}: not a valid federated state file ({})", path_, why));
  }

 private:
  std::string_view bytes_;
  const std::string& path_;
  size_t at_ = 0;
};

}  // namespace

int64_t StateFile::int_or(const std::string& name, int64_t fallback) const {
  auto it = ints.find(name);
  return it == ints.end() ? fallback : it->second;
}

const std::vector<float>& StateFile::tensor(const std::string& name, int64_t count,
                                            const std::string& path) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw CheckpointError(fmt::format("{}: holds no {}", path, name));
  if (static_cast<int64_t>(it->second.size()) != count) {
    throw CheckpointError(fmt::format("{}: {} holds {} values, this run's model has {}", path, name,
                                      it->second.size(), count));
  }
  return it->second;
}

void write_state_file(const std::string& path, const StateFile& state) {
  std::string out;
  put(out, kStateMagic);
  put(out, kStateVersion);
  put(out, static_cast<uint32_t>(state.ints.size()));
  put(out, static_cast<uint32_t>(state.tensors.size()));
  for (const auto& [name, value] : state.ints) {
    put_name(out, name);
    put(out, value);
  }
  for (const auto& [name, values] : state.tensors) {
    put_name(out, name);
    put(out, static_cast<int64_t>(values.size()));
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  }
  put(out, crc32c(out));
  try {
    write_file_atomic(path, out, 0600);  // the coordinator's holds its DP key
  } catch (const Error& e) {
    throw SaveError(fmt::format("cannot save the federated state {}: {}", path, e.what()));
  }
}

StateFile read_state_file(const std::string& path) {
  // The largest state: three model-sized vectors of at most kFedMaxValues each.
  const std::string bytes = read_file(path, 3 * kFedMaxValues * 4 + (1 << 20));
  Reader r(bytes, path);
  if (bytes.size() < 20) r.fail("shorter than a header");
  uint32_t crc = 0;
  std::memcpy(&crc, bytes.data() + bytes.size() - 4, 4);
  if (crc32c(bytes.data(), bytes.size() - 4) != crc) r.fail("checksum mismatch");
  if (r.get<uint32_t>() != kStateMagic) r.fail("bad magic");
  if (const auto v = r.get<uint32_t>(); v != kStateVersion) r.fail(fmt::format("version {}", v));
  const auto ints = r.get<uint32_t>(), tensors = r.get<uint32_t>();
  if (ints > kMaxEntries || tensors > kMaxEntries) r.fail("too many entries");
  StateFile state;
  for (uint32_t i = 0; i < ints; ++i) {
    std::string name = r.name();
    state.ints[name] = r.get<int64_t>();
  }
  for (uint32_t t = 0; t < tensors; ++t) {
    std::string name = r.name();
    const auto count = r.get<int64_t>();
    // Checked against the bytes left before anything is allocated for them.
    if (count < 0 || count > kFedMaxValues ||
        static_cast<size_t>(count) * sizeof(float) > r.left()) {
      r.fail(fmt::format("{} claims {} values", name, count));
    }
    std::vector<float>& values = state.tensors[name];
    values.resize(static_cast<size_t>(count));
    const char* data = r.take(static_cast<size_t>(count) * sizeof(float));
    if (count > 0) std::memcpy(values.data(), data, static_cast<size_t>(count) * sizeof(float));
  }
  if (r.at() != bytes.size() - 4) r.fail("bytes after the last entry");
  return state;
}

}  // namespace brigade
