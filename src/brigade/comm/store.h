#pragma once
// Rendezvous stores: a small key-value space all ranks of a job can reach before any
// communicator exists. Ranks publish their addresses in it and wait for each other's. Two
// implementations: FileStore (a directory on a shared file system, file_store.h) and TcpStore
// (a server thread on rank 0, tcp_store.h). Both are gloo::rendezvous::Store, so Gloo's
// connectFullMesh uses them directly.
//
// Every blocking call is bounded: wait() and get() give up after the store's timeout (or the
// one passed) and throw CommError(kTimeout) naming the missing keys and the store.
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace brigade {

class Store : public gloo::rendezvous::Store {
 public:
  explicit Store(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  // Stores value under key, replacing any earlier value.
  void set(const std::string& key, const std::vector<char>& value) override = 0;
  // Waits up to timeout() for key, then returns its value.
  std::vector<char> get(const std::string& key) override = 0;
  // Waits until every key exists; CommError(kTimeout) after `timeout`.
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override = 0;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  // True if every key exists now; never blocks on missing keys.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Atomically adds delta to the integer stored at key (missing = 0); returns the new value.
  // A sum outside int64 is refused with CommError(kOther) naming the key; the value stays.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Where the store lives, for messages: "file store /shared/run" or "tcp store 10.0.0.1:29500".
  virtual std::string describe() const = 0;

  std::chrono::milliseconds timeout() const { return timeout_; }

  // Convenience for text values.
  void set_string(const std::string& key, const std::string& value) {
    set(key, std::vector<char>(value.begin(), value.end()));
  }
  std::string get_string(const std::string& key) {
    std::vector<char> v = get(key);
    return std::string(v.begin(), v.end());
  }

 private:
  std::chrono::milliseconds timeout_;
};

// A view of another store where every key is "<prefix>/<key>": lets each group (world, each dp
// group, ...) rendezvous in its own namespace of one shared store.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);

  void set(const std::string& key, const std::vector<char>& value) override;
  std::vector<char> get(const std::string& key) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string describe() const override;

 private:
  std::string join(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> join(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> base_;
};

namespace detail {
// Largest value a store accepts (and reads back); longer data is refused with an error.
inline constexpr int64_t kMaxStoreValueBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxStoreKeyBytes = 4096;
// "a", "b" -> "[a, b]" for error messages (at most a few keys, then "...").
std::string format_keys(const std::vector<std::string>& keys);
// Parses a decimal int64 written by add(); false if the text is not one.
bool parse_int64(const std::string& text, int64_t* out);
// Why add(key, delta) on `value` was refused: the sum does not fit in int64.
std::string add_overflow_message(const std::string& key, int64_t value, int64_t delta);
}  // namespace detail

}  // namespace brigade
