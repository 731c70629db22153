#pragma once
// Small text exchanges over a communicator, for the control messages of sharded checkpoints
// (piece declarations, file digests, error messages). Collective: every member calls with its
// own text. Each costs two collectives (the lengths, then the bytes). Throws CommError.
#include <string>
#include <vector>

#include "brigade/comm/communicator.h"

namespace brigade {

// Every rank's text, in rank order, on every rank.
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine);

// root's text on every rank (`text` is read on root only).
std::string broadcast_string(Communicator& comm, const std::string& text, int root);

}  // namespace brigade
