#include "brigade/parallel/shard_transfer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace brigade {

namespace {

constexpr uint32_t kShardTag = 0x2e50;  // "ZERO" shard transfers; matched in order per pair

}  // namespace

void scatter_from_root(Communicator& dp, const ShardLayout& shards, const float* full,
                       float* mine) {
  const int me = dp.rank();
  if (me == 0) {
    std::vector<std::unique_ptr<Work>> sends;
    for (int r = 1; r < dp.size(); ++r) {
      const FlatRange piece = shards.owned(r);
      if (!piece.empty())
        sends.push_back(
            dp.send_async(full + piece.begin, piece.size() * sizeof(float), r, kShardTag));
    }
    const FlatRange own = shards.owned(0);
    if (full + own.begin != mine) std::copy(full + own.begin, full + own.end, mine);
    for (auto& s : sends) s->wait();
  } else {
    const FlatRange own = shards.owned(me);
    if (!own.empty()) dp.recv(mine, own.size() * sizeof(float), 0, kShardTag);
  }
}

double sum_over_ranks(Communicator& dp, double value) {
  std::vector<double> all(static_cast<size_t>(dp.size()));
  dp.all_gather_bytes(reinterpret_cast<const uint8_t*>(&value),
                      reinterpret_cast<uint8_t*>(all.data()), sizeof(double));
  double sum = 0;
  for (double v : all) sum += v;
  return sum;
}

}  // namespace brigade
