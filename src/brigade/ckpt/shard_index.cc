#include "brigade/ckpt/shard_index.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "brigade/base/error.h"
#include "brigade/base/json_limits.h"

namespace brigade {

namespace {

// A bound on what one tensor's coverage check may allocate (16 bytes a run): far above any real
// layout (a column split of a 10^5-row matrix over 64 ranks is 6.4M runs).
constexpr int64_t kMaxRunsPerTensor = int64_t{1} << 24;
// Tensor names and keys (GPT-2's longest is ~30 bytes), so that messages quoting them are short.
constexpr size_t kMaxNameBytes = 1024;

std::optional<int64_t> as_int(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

// An array of integers, or nullopt.
std::optional<std::vector<int64_t>> as_int_array(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& v : *it) {
    const auto i = as_int(v);
    if (!i) return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

}  // namespace

std::string shard_file_name(int rank) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "rank_%05d.safetensors", rank);
  return buf;
}

int64_t ShardTensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::optional<std::string> shard_coverage_error(const ShardTensorEntry& t) {
  struct Tagged {
    FlatRun run;
    size_t piece;
  };
  std::vector<Tagged> runs;
  for (size_t p = 0; p < t.pieces.size(); ++p) {
    for (const FlatRun& r : region_runs(t.pieces[p].region, t.shape)) runs.push_back({r, p});
  }
  std::sort(runs.begin(), runs.end(),
            [](const Tagged& a, const Tagged& b) { return a.run.begin < b.run.begin; });
  auto describe = [&](size_t p) {
    return "rank " + std::to_string(t.pieces[p].rank) + "'s " + t.pieces[p].region.to_string();
  };
  int64_t covered = 0;  // every element below this is covered exactly once
  for (size_t i = 0; i < runs.size(); ++i) {
    const Tagged& r = runs[i];
    if (r.run.begin < covered) {
      return describe(r.piece) + " overlaps " + describe(runs[i - 1].piece) + " at element " +
             std::to_string(r.run.begin);
    }
    if (r.run.begin > covered) {
      return "element " + std::to_string(covered) + " is in no piece";
    }
    covered = r.run.end;
  }
  if (covered != t.numel()) return "element " + std::to_string(covered) + " is in no piece";
  return std::nullopt;
}

nlohmann::json ShardIndex::to_json() const {
  nlohmann::json tj = nlohmann::json::object();
  for (const auto& [name, t] : tensors) {
    nlohmann::json pieces = nlohmann::json::array();
    for (const ShardPieceEntry& p : t.pieces) {
      pieces.push_back({{"rank", p.rank},
                        {"file", p.file},
                        {"key", p.key},
                        {"flat", p.region.flat},
                        {"start", p.region.start},
                        {"count", p.region.count}});
    }
    tj[name] = {{"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"pieces", pieces}};
  }
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& s : rank_state) rs.push_back(s);
  return {{"world_size", world_size}, {"mesh", mesh}, {"tensors", tj}, {"rank_state", rs}};
}

ShardIndex ShardIndex::from_json(const nlohmann::json& j, const std::string& path,
                                 const std::map<std::string, FileDigest>& files) {
  auto bad = [&](const std::string& what) { return CheckpointError(path + ": sharding: " + what); };
  if (!j.is_object()) throw bad("not an object");
  ShardIndex x;
  const auto ws = j.find("world_size");
  const auto ws_value = ws == j.end() ? std::nullopt : as_int(*ws);
  if (!ws_value || *ws_value < 1 || *ws_value > (1 << 24)) {
    throw bad("world_size is missing or not a positive integer");
  }
  x.world_size = static_cast<int>(*ws_value);
  if (const auto m = j.find("mesh"); m != j.end()) x.mesh = *m;
  const auto rs = j.find("rank_state");
  if (rs != j.end()) {
    if (!rs->is_array() || static_cast<int64_t>(rs->size()) != x.world_size) {
      throw bad("rank_state must be an array of world_size entries");
    }
    for (const auto& s : *rs) x.rank_state.push_back(s);
  }
  const auto tensors = j.find("tensors");
  if (tensors == j.end() || !tensors->is_object()) throw bad("tensors is missing");
  for (const auto& item : tensors->items()) {
    const std::string& name = item.key();
    const nlohmann::json& tj = item.value();
    auto bad_t = [&](const std::string& what) {
      return bad("tensor " + json_excerpt(nlohmann::json(name)) + ": " + what);
    };
    if (name.empty() || name.size() > kMaxNameBytes) throw bad_t("name is empty or too long");
    if (!tj.is_object()) throw bad_t("not an object");
    ShardTensorEntry t;
    const auto dt = tj.find("dtype");
    const auto dtype =
        dt != tj.end() && dt->is_string() ? parse_st_dtype(dt->get<std::string>()) : std::nullopt;
    if (!dtype) throw bad_t("missing or unknown dtype");
    t.dtype = *dtype;
    const auto shape = as_int_array(tj, "shape");
    if (!shape) throw bad_t("shape is not an array of integers");
    t.shape = *shape;
    if (const auto err = region_error(Region::whole(t.shape), t.shape)) throw bad_t(*err);
    const auto pieces = tj.find("pieces");
    if (pieces == tj.end() || !pieces->is_array()) throw bad_t("pieces is not an array");
    int64_t runs = 0;  // the coverage check below materialises them
    for (const auto& pj : *pieces) {
      if (!pj.is_object()) throw bad_t("a piece is not an object");
      ShardPieceEntry p;
      const auto rank = pj.contains("rank") ? as_int(pj["rank"]) : std::nullopt;
      if (!rank || *rank < 0 || *rank >= x.world_size) throw bad_t("piece rank is out of range");
      p.rank = static_cast<int>(*rank);
      if (!pj.contains("file") || !pj["file"].is_string() || !pj.contains("key") ||
          !pj["key"].is_string()) {
        throw bad_t("piece needs string file and key");
      }
      p.file = pj["file"].get<std::string>();
      p.key = pj["key"].get<std::string>();
      if (!files.count(p.file)) {
        throw bad_t("piece file " + json_excerpt(pj["file"]) + " is not in the manifest");
      }
      if (p.key.empty() || p.key.size() > kMaxNameBytes) {
        throw bad_t("piece key is empty or longer than " + std::to_string(kMaxNameBytes) +
                    " bytes");
      }
      if (!pj.contains("flat") || !pj["flat"].is_boolean()) throw bad_t("piece flat is not bool");
      p.region.flat = pj["flat"].get<bool>();
      const auto start = as_int_array(pj, "start");
      const auto count = as_int_array(pj, "count");
      if (!start || !count) throw bad_t("piece start/count are not integer arrays");
      p.region.start = *start;
      p.region.count = *count;
      if (const auto err = region_error(p.region, t.shape)) throw bad_t(*err);
      runs += region_run_count(p.region, t.shape);
      if (runs > kMaxRunsPerTensor) {
        throw bad_t("its pieces cut it into more than " + std::to_string(kMaxRunsPerTensor) +
                    " contiguous runs");
      }
      t.pieces.push_back(std::move(p));
    }
    if (const auto err = shard_coverage_error(t)) throw bad_t(*err);
    x.tensors.emplace(name, std::move(t));
  }
  return x;
}

}  // namespace brigade
