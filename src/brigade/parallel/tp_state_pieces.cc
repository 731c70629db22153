#include "brigade/parallel/tp_state_pieces.h"

#include <algorithm>

#include "brigade/base/check.h"

namespace brigade {

std::vector<StatePiece> tp_state_pieces(const ParamLayout& local, float* buf,
                                        const std::string& name_prefix) {
  std::vector<StatePiece> out;
  for (const ParamSpec& s : local.specs()) {
    const std::string name = name_prefix + s.name;
    float* data = buf + s.offset;
    if (!s.is_tp_shard()) {
      out.push_back({{.tensor = name, .shape = s.shape, .region = Region::whole(s.shape)}, data});
      continue;
    }
    const std::vector<int64_t>& full = s.full_shape;
    BRIGADE_CHECK(full.size() == s.shape.size() && s.shape[0] % s.tp_parts == 0)
        << s.name << ": shard " << shape_string(s.shape) << " of " << shape_string(full);
    if (s.tp_split == TpSplit::kDim0) {
      // Block b of the split dim holds `piece` rows of this rank at full rows
      // b * full_block + tp_rank * piece; rows at or past full[0] are padding.
      const int64_t piece = s.shape[0] / s.tp_parts;
      const int64_t full_block = s.tp_parts == 1 ? piece * s.tp_size : full[0] / s.tp_parts;
      const int64_t row_elems = s.numel / s.shape[0];
      for (int b = 0; b < s.tp_parts; ++b) {
        const int64_t first = b * full_block + s.tp_rank * piece;
        const int64_t rows = std::min(piece, full[0] - first);
        if (rows <= 0) continue;  // a shard of padding only
        std::vector<int64_t> start(full.size(), 0), count = full;
        start[0] = first;
        count[0] = rows;
        out.push_back({{.tensor = name,
                        .shape = full,
                        .region = Region::box(std::move(start), std::move(count))},
                       data + b * piece * row_elems});
      }
    } else {
      // A column block over every row is contiguous in the region's row-major order only as
      // one block: several blocks per row (tp_parts > 1) would interleave.
      BRIGADE_CHECK(s.tp_parts == 1 && full.size() == 2)
          << s.name << ": a kDim1 split of " << s.tp_parts << " blocks";
      const int64_t cols = s.shape[1];
      out.push_back({{.tensor = name,
                      .shape = full,
                      .region = Region::box({0, s.tp_rank * cols}, {full[0], cols})},
                     data});
    }
  }
  return out;
}

}  // namespace brigade
