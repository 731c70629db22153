#include "brigade/ckpt/shard_plan.h"

#include <algorithm>
#include <map>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/json_limits.h"
#include "brigade/ckpt/json_exchange.h"

namespace brigade {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

}  // namespace

nlohmann::json shard_pieces_to_json(const std::vector<ShardPiece>& pieces) {
  nlohmann::json j = nlohmann::json::array();
  for (const ShardPiece& p : pieces) {
    j.push_back({{"tensor", p.tensor},
                 {"shape", p.shape},
                 {"dtype", st_dtype_name(p.dtype)},
                 {"flat", p.region.flat},
                 {"start", p.region.start},
                 {"count", p.region.count}});
  }
  return j;
}

std::vector<ShardPiece> shard_pieces_from_json(const nlohmann::json& j, const std::string& who) {
  std::vector<ShardPiece> out;
  try {
    for (const auto& pj : j) {
      ShardPiece p;
      p.tensor = pj.at("tensor").get<std::string>();
      p.shape = pj.at("shape").get<std::vector<int64_t>>();
      const auto dtype = parse_st_dtype(pj.at("dtype").get<std::string>());
      if (!dtype) throw ConfigError(who + ": unknown dtype in " + json_excerpt(pj));
      p.dtype = *dtype;
      p.region.flat = pj.at("flat").get<bool>();
      p.region.start = pj.at("start").get<std::vector<int64_t>>();
      p.region.count = pj.at("count").get<std::vector<int64_t>>();
      out.push_back(std::move(p));
    }
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(who + ": malformed piece declarations: " + e.what());
  }
  return out;
}

ShardPlan ShardPlan::build(Communicator& comm, std::vector<ShardPiece> mine, nlohmann::json mesh,
                           int64_t split_bytes) {
  const std::vector<std::string> texts =
      all_gather_strings(comm, shard_pieces_to_json(mine).dump());
  std::vector<std::vector<ShardPiece>> all;
  for (int r = 0; r < comm.size(); ++r) {
    const std::string who = "checkpoint pieces of rank " + std::to_string(r);
    nlohmann::json j;
    try {
      j = parse_json_bounded(texts[r], who);
    } catch (const IoError& e) {
      throw ConfigError(e.what());
    }
    all.push_back(r == comm.rank() ? mine : shard_pieces_from_json(j, who));
  }
  return from_all(comm.rank(), all, std::move(mesh), split_bytes);
}

namespace {

// One distinct (tensor, region) and every rank that declared it, ascending, with the index of
// the piece in that rank's declarations.
struct PieceGroup {
  const ShardPiece* piece = nullptr;
  std::vector<std::pair<int, size_t>> holders;
};

// Rows [begin, end) of the region's first dimension (of its view: the shape, or (numel,)).
Region first_dim_block(const Region& r, int64_t begin, int64_t end) {
  Region block = r;
  block.start[0] += begin;
  block.count[0] = end - begin;
  return block;
}

}  // namespace

ShardPlan ShardPlan::from_all(int rank, const std::vector<std::vector<ShardPiece>>& all,
                              nlohmann::json mesh, int64_t split_bytes) {
  BRIGADE_CHECK(rank >= 0 && rank < static_cast<int>(all.size()))
      << "rank " << rank << " of " << all.size();
  ShardPlan plan;
  plan.rank_ = rank;
  plan.pieces_ = all[rank];
  plan.index_.world_size = static_cast<int>(all.size());
  plan.index_.mesh = std::move(mesh);
  // Pass 1: validate every declaration and group identical ones, in declaration order.
  std::map<std::string, int> declared_by;  // tensor -> first rank that declared it
  std::vector<PieceGroup> groups;
  std::map<std::string, std::vector<size_t>> groups_of;  // tensor -> its groups
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    for (size_t i = 0; i < all[r].size(); ++i) {
      const ShardPiece& p = all[r][i];
      const std::string where = "checkpoint piece '" + p.tensor + "' " + p.region.to_string() +
                                " of rank " + std::to_string(r);
      if (p.tensor.empty() || p.tensor == "__metadata__" || p.tensor.find('#') != std::string::npos)
        throw ConfigError(where + ": tensor names must be non-empty, without '#'");
      if (const auto err = region_error(p.region, p.shape)) throw ConfigError(where + ": " + *err);
      auto [it, fresh] = plan.index_.tensors.try_emplace(p.tensor);
      ShardTensorEntry& t = it->second;
      if (fresh) {
        t.shape = p.shape;
        t.dtype = p.dtype;
        declared_by[p.tensor] = r;
      } else if (t.shape != p.shape || t.dtype != p.dtype) {
        throw ConfigError(where + ": shape " + shape_str(p.shape) + " " + st_dtype_name(p.dtype) +
                          " differs from rank " + std::to_string(declared_by[p.tensor]) + "'s " +
                          shape_str(t.shape) + " " + st_dtype_name(t.dtype));
      }
      std::vector<size_t>& mine = groups_of[p.tensor];
      PieceGroup* same = nullptr;
      for (size_t g : mine) same = groups[g].piece->region == p.region ? &groups[g] : same;
      if (!same) {
        mine.push_back(groups.size());
        groups.push_back(PieceGroup{&p, {}});
        same = &groups.back();
      }
      if (same->holders.empty() || same->holders.back().first != r) same->holders.push_back({r, i});
    }
  }
  // Pass 2: who writes what. Every rank runs this on the same input, so all agree.
  std::map<std::pair<int, std::string>, int> keys_used;  // (rank, tensor) -> pieces so far
  for (const PieceGroup& g : groups) {
    const ShardPiece& p = *g.piece;
    const int64_t elem = st_dtype_size(p.dtype);
    const int64_t numel = p.region.numel();
    const int64_t rows = p.region.count.empty() ? 1 : p.region.count[0];
    const bool split = g.holders.size() > 1 && rows > 1 && numel * elem >= split_bytes;
    const int64_t parts =
        split ? std::min<int64_t>(static_cast<int64_t>(g.holders.size()), rows) : 1;
    const int64_t row_numel = rows > 0 ? numel / rows : 0;
    for (int64_t j = 0; j < parts; ++j) {
      const auto [r, i] = g.holders[static_cast<size_t>(j)];
      const int64_t begin = rows * j / parts, end = rows * (j + 1) / parts;
      const Region region = split ? first_dim_block(p.region, begin, end) : p.region;
      const int k = keys_used[{r, p.tensor}]++;
      ShardPieceEntry e{r, shard_file_name(r),
                        k == 0 ? p.tensor : p.tensor + "#" + std::to_string(k), region};
      if (r == rank) {
        const int64_t nbytes = region.numel() * elem;
        plan.written_.push_back({i, e.key, region, begin * row_numel * elem, nbytes});
        plan.bytes_to_write_ += nbytes;
        plan.file_name_ = e.file;
      }
      plan.index_.tensors.at(p.tensor).pieces.push_back(std::move(e));
    }
  }
  for (const auto& [name, t] : plan.index_.tensors) {
    if (const auto err = shard_coverage_error(t)) {
      throw ConfigError("checkpoint tensor '" + name + "' " + shape_str(t.shape) +
                        ": the declared pieces do not tile it: " + *err);
    }
  }
  return plan;
}

}  // namespace brigade
