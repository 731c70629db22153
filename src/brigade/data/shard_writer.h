#pragma once
// Writing the files of a tokenized corpus folder (data/shard_index.h) so that a process killed at
// any point leaves nothing a reader would take for finished output: each shard is written to
// "<name>.tmp", fsynced and renamed into place, and the index, the one file that makes the folder
// readable, is written the same way after every shard is in place.
#include <string>

#include "brigade/data/shard_cutter.h"
#include "brigade/data/shard_index.h"
#include "brigade/data/tokenizer.h"

namespace brigade {

// Removes what an earlier `brigade tokenize` left in dir (is_tokenize_output_name: the index
// first, then tokenizer, shards and temporary files) and fsyncs dir; other files stay.
void clear_tokenize_output(const std::string& dir);

// Encodes shard's text with tokenizer and writes it atomically as dir/shard_file_name(...),
// returning its index entry. The directory is not fsynced (the caller does, once, for all).
//
// Test hook: with BRIGADE_FAULT_TOKENIZE_KILL_RANK = rank, the call that writes that rank's
// second shard kills the process (SIGKILL) after the temporary file is written, before the
// rename, as a crash would.
ShardEntry write_shard(const std::string& dir, const ShardText& shard, const Tokenizer& tokenizer,
                       int rank);

}  // namespace brigade
