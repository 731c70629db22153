#include "brigade/ckpt/json_exchange.h"

#include <cstring>

#include "brigade/base/error.h"
#include "brigade/comm/store.h"

namespace brigade {

namespace {

// A length announced by a peer; bounded so a corrupted message cannot make us allocate wildly.
int64_t checked_length(int64_t n, const Communicator& comm, int from) {
  if (n < 0 || n > detail::kMaxStoreValueBytes) {
    throw CommError(CommError::Kind::kOther, "checkpoint control message of " + std::to_string(n) +
                                                 " bytes from rank " + std::to_string(from) +
                                                 " of group " + comm.name() + " is invalid");
  }
  return n;
}

}  // namespace

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine) {
  const int n = comm.size();
  const int64_t my_len = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(n);
  comm.all_gather_bytes(reinterpret_cast<const uint8_t*>(&my_len),
                        reinterpret_cast<uint8_t*>(lengths.data()), sizeof(int64_t));
  int64_t total = 0;
  for (int r = 0; r < n; ++r) total += checked_length(lengths[r], comm, r);
  std::string all(static_cast<size_t>(total), '\0');
  comm.all_gather_bytes_v(reinterpret_cast<const uint8_t*>(mine.data()),
                          reinterpret_cast<uint8_t*>(all.data()), lengths);
  std::vector<std::string> out;
  int64_t offset = 0;
  for (int r = 0; r < n; ++r) {
    out.push_back(all.substr(static_cast<size_t>(offset), static_cast<size_t>(lengths[r])));
    offset += lengths[r];
  }
  return out;
}

std::string broadcast_string(Communicator& comm, const std::string& text, int root) {
  int64_t len = comm.rank() == root ? static_cast<int64_t>(text.size()) : 0;
  comm.broadcast_bytes(&len, sizeof(len), root);
  std::string out = comm.rank() == root ? text : std::string(checked_length(len, comm, root), '\0');
  if (len > 0) comm.broadcast_bytes(out.data(), len, root);
  return out;
}

}  // namespace brigade
