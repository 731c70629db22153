#include "brigade/ckpt/sharded_reader.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/json_limits.h"
#include "brigade/ckpt/checkpoint_validation.h"
#include "brigade/ckpt/json_exchange.h"
#include "brigade/ckpt/safetensors.h"

namespace brigade {

namespace {

// A format-1 checkpoint as an index: every tensor of every safetensors file is one piece
// that covers it, written by "rank 0".
ShardIndex index_of_whole_tensor_checkpoint(const std::string& dir, const Manifest& m) {
  ShardIndex index;
  for (const auto& file_digest : m.files) {
    const std::string& filename = file_digest.first;  // a lambda below captures it
    if (!filename.ends_with(".safetensors")) continue;
    SafetensorsFile f = [&] {
      try {
        return SafetensorsFile::open(dir + "/" + filename);
      } catch (const IoError& e) {
        throw CheckpointError(e.what());
      }
    }();
    for (const std::string& name : f.names()) {
      const StTensorInfo& info = f.info(name);
      ShardTensorEntry t{info.dtype, info.shape, {{0, filename, name, Region::whole(info.shape)}}};
      if (!index.tensors.emplace(name, std::move(t)).second) {
        throw CheckpointError(dir + "/" + filename + ": tensor '" + name +
                              "' is also in another file of the checkpoint");
      }
    }
  }
  return index;
}

// Runs fn on every rank and agrees on the outcome: "" everywhere, or the first (lowest rank's)
// error everywhere.
template <typename Fn>
std::string agree(Communicator* comm, Fn&& fn) {
  std::string error;
  try {
    fn();
  } catch (const Error& e) {
    error = e.what();
  }
  if (!comm) return error;
  for (const std::string& e : all_gather_strings(*comm, error)) {
    if (!e.empty()) return e;
  }
  return "";
}

}  // namespace

struct ShardedCheckpointReader::Cache {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files;
};

ShardedCheckpointReader::ShardedCheckpointReader(std::string dir, Manifest manifest,
                                                 ShardIndex index)
    : dir_(std::move(dir)),
      manifest_(std::move(manifest)),
      index_(std::move(index)),
      cache_(std::make_unique<Cache>()) {}
ShardedCheckpointReader::ShardedCheckpointReader(ShardedCheckpointReader&&) noexcept = default;
ShardedCheckpointReader& ShardedCheckpointReader::operator=(ShardedCheckpointReader&&) noexcept =
    default;
ShardedCheckpointReader::~ShardedCheckpointReader() = default;

ShardedCheckpointReader ShardedCheckpointReader::open(const std::string& dir_in,
                                                      Communicator* comm) {
  const std::string dir = strip_trailing_slashes(dir_in);
  const int rank = comm ? comm->rank() : 0;
  const int size = comm ? comm->size() : 1;
  Manifest m;
  ShardIndex index;
  // Every rank parses the (small) manifest; file i is verified by rank i % size.
  const std::string error = agree(comm, [&] {
    m = load_manifest(dir);
    int i = 0;
    for (const auto& [name, digest] : m.files) {
      if (i++ % size == rank) verify_checkpoint_file(dir, name, digest);
    }
    const std::string manifest_path = dir + "/" + kManifestFileName;
    index = is_sharded_format(m.format_version)
                ? ShardIndex::from_json(m.sharding, manifest_path, m.files)
                : index_of_whole_tensor_checkpoint(dir, m);
  });
  if (!error.empty()) throw CheckpointError(error);
  return ShardedCheckpointReader(dir, std::move(m), std::move(index));
}

std::optional<ShardedCheckpointReader> ShardedCheckpointReader::open_latest_valid(
    const std::string& root_in, Communicator* comm, std::vector<std::string>* rejections) {
  const std::string root = strip_trailing_slashes(root_in);
  const bool leader = !comm || comm->rank() == 0;
  auto reject = [&](const std::string& what) {
    const std::string line = "checkpoint rejected: " + what;
    if (leader) std::fprintf(stderr, "[rank %d] warning: %s\n", detail::log_rank(), line.c_str());
    if (rejections) rejections->push_back(line);
  };
  // Rank 0 decides the order, so every rank tries the same folders.
  nlohmann::json plan = {{"candidates", nlohmann::json::array()},
                         {"rejected", nlohmann::json::array()},
                         {"error", ""}};
  if (leader) {
    try {
      plan["candidates"] = checkpoint_candidates(
          root, [&](const std::string& what) { plan["rejected"].push_back(what); });
    } catch (const Error& e) {
      plan["error"] = e.what();
    }
  }
  if (comm) plan = parse_json_bounded(broadcast_string(*comm, plan.dump(), 0), "rank 0's plan");
  if (!plan["error"].get<std::string>().empty()) throw IoError(plan["error"].get<std::string>());
  for (const auto& what : plan["rejected"]) reject(what.get<std::string>());
  for (const auto& name : plan["candidates"]) {
    try {
      return open(root + "/" + name.get<std::string>(), comm);
    } catch (const CheckpointError& e) {
      reject(e.what());
    }
  }
  return std::nullopt;
}

const nlohmann::json& ShardedCheckpointReader::rank_state(int r) const {
  static const nlohmann::json kNull;
  if (r < 0 || r >= static_cast<int>(index_.rank_state.size())) return kNull;
  return index_.rank_state[static_cast<size_t>(r)];
}

const ShardTensorEntry& ShardedCheckpointReader::tensor(const std::string& name) const {
  const auto it = index_.tensors.find(name);
  if (it == index_.tensors.end()) {
    throw CheckpointError(dir_ + ": no tensor '" + name + "' in the checkpoint");
  }
  return it->second;
}

// Opens a file on first use and checks that it holds every piece the index puts in it.
const SafetensorsFile& ShardedCheckpointReader::file(const std::string& filename) const {
  std::lock_guard<std::mutex> lock(cache_->mu);
  auto& slot = cache_->files[filename];
  if (slot) return *slot;
  try {
    auto f = std::make_unique<SafetensorsFile>(SafetensorsFile::open(dir_ + "/" + filename));
    for (const auto& [name, t] : index_.tensors) {
      for (const ShardPieceEntry& p : t.pieces) {
        if (p.file != filename) continue;
        const bool holds =
            f->contains(p.key) && f->info(p.key).dtype == t.dtype &&
            (p.view_offset >= 0 ? f->info(p.key).shape.size() == 1 &&
                                      p.view_offset + p.region.numel() <= f->info(p.key).shape[0]
                                : f->info(p.key).shape == p.region.count);
        if (!holds) {
          throw CheckpointError(f->path() + ": does not hold piece '" + p.key + "' of tensor '" +
                                name + "' as " + st_dtype_name(t.dtype) + " " +
                                p.region.to_string() + ", as the manifest says");
        }
      }
    }
    slot = std::move(f);
  } catch (const IoError& e) {
    cache_->files.erase(filename);
    throw CheckpointError(e.what());
  } catch (...) {
    cache_->files.erase(filename);
    throw;
  }
  return *slot;
}

void ShardedCheckpointReader::read(const std::string& name, const Region& region, void* out,
                                   int64_t nbytes) const {
  const ShardTensorEntry& t = tensor(name);
  if (const auto err = region_error(region, t.shape)) {
    throw CheckpointError(dir_ + ": cannot read tensor '" + name + "': " + *err);
  }
  const int64_t esize = st_dtype_size(t.dtype);
  BRIGADE_CHECK(nbytes == region.numel() * esize)
      << "read of " << name << " " << region.to_string() << ": " << nbytes << " bytes given, "
      << region.numel() * esize << " needed";
  auto* dst = static_cast<char*>(out);
  int64_t copied = 0;
  for (const ShardPieceEntry& p : t.pieces) {
    const std::vector<RegionOverlap> overlap = region_overlap(p.region, region, t.shape);
    if (overlap.empty()) continue;
    const SafetensorsFile& f = file(p.file);
    try {
      const int64_t first = std::max<int64_t>(p.view_offset, 0);
      for (const RegionOverlap& o : overlap) {
        f.read_raw_range(p.key, dst + o.b_offset * esize, (first + o.a_offset) * esize,
                         o.length * esize);
        copied += o.length;
      }
    } catch (const IoError& e) {
      throw CheckpointError(e.what());
    }
  }
  // The index was checked to tile every tensor, so this holds unless that check is wrong.
  BRIGADE_CHECK(copied == region.numel())
      << name << " " << region.to_string() << ": pieces covered " << copied << " of "
      << region.numel() << " elements";
}

bool ShardedCheckpointReader::add_flat_views(const std::string& flat,
                                             const std::vector<FlatSlot>& slots, int64_t total) {
  const auto it = index_.tensors.find(flat);
  if (it == index_.tensors.end() || it->second.shape != std::vector<int64_t>{total}) return false;
  for (const FlatSlot& s : slots) {
    if (index_.tensors.count(flat + "/" + s.name)) return false;
  }
  const ShardTensorEntry& whole = it->second;
  for (const FlatSlot& s : slots) {
    ShardTensorEntry t{whole.dtype, s.shape, {}};
    const int64_t numel = t.numel();
    for (const ShardPieceEntry& p : whole.pieces) {
      // A piece of a 1-D tensor is one run, whether saved as a box or a flat range.
      const int64_t begin = p.region.start[0], end = begin + p.region.count[0];
      const int64_t lo = std::max(begin, s.offset), hi = std::min(end, s.offset + numel);
      if (lo >= hi) continue;
      t.pieces.push_back({.rank = p.rank,
                          .file = p.file,
                          .key = p.key,
                          .region = Region::range(lo - s.offset, hi - s.offset),
                          .view_offset = std::max<int64_t>(p.view_offset, 0) + (lo - begin)});
    }
    if (const auto err = shard_coverage_error(t)) {
      throw CheckpointError(dir_ + ": flat tensor '" + flat + "' does not cover '" + s.name +
                            "' at [" + std::to_string(s.offset) + ", " +
                            std::to_string(s.offset + numel) + "): " + *err);
    }
    index_.tensors.emplace(flat + "/" + s.name, std::move(t));
  }
  return true;
}

void ShardedCheckpointReader::read_f32(const std::string& name, const Region& region, float* out,
                                       int64_t count) const {
  const ShardTensorEntry& t = tensor(name);
  if (t.dtype != StDtype::kF32) {
    throw CheckpointError(dir_ + ": tensor '" + name + "' is " + st_dtype_name(t.dtype) +
                          ", not F32");
  }
  read(name, region, out, count * 4);
}

}  // namespace brigade
