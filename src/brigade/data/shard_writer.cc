#include "brigade/data/shard_writer.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/data/token_shard.h"

namespace brigade {

namespace {

bool kill_now(int rank) {
  static int written = 0;
  const char* r = std::getenv("BRIGADE_FAULT_TOKENIZE_KILL_RANK");
  return r != nullptr && *r != '\0' && std::atoi(r) == rank && ++written == 2;
}

}  // namespace

void clear_tokenize_output(const std::string& dir) {
  namespace fs = std::filesystem;
  // The index goes first and durably: from then on the folder is unreadable until the new
  // index appears, whatever else is replaced in between.
  remove_all(dir + "/" + kShardIndexFile);
  fsync_dir(dir);
  std::error_code ec;
  std::vector<std::string> stale;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (is_tokenize_output_name(e.path().filename().string())) stale.push_back(e.path().string());
  }
  if (ec) throw IoError(dir + ": cannot list folder: " + ec.message());
  for (const std::string& path : stale) remove_all(path);
  fsync_dir(dir);
}

ShardEntry write_shard(const std::string& dir, const ShardText& shard, const Tokenizer& tokenizer,
                       int rank) {
  const std::vector<int32_t> tokens = tokenizer.encode(shard.text);
  const std::string bytes =
      token_shard_bytes(tokens, static_cast<uint32_t>(tokenizer.vocab_size()));
  ShardEntry e;
  e.file = shard_file_name(split_name(shard.split), shard.number);
  e.docs = shard.docs;
  e.text_bytes = static_cast<int64_t>(shard.text.size());
  e.tokens = static_cast<int64_t>(tokens.size());
  const std::string path = dir + "/" + e.file;
  const FileDigest d = write_file_durable(path + ".tmp", bytes);
  if (kill_now(rank)) ::kill(::getpid(), SIGKILL);
  rename_atomic(path + ".tmp", path);
  e.bytes = d.bytes;
  e.crc32 = d.crc32;
  return e;
}

}  // namespace brigade
