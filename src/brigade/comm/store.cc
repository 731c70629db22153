#include "brigade/comm/store.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

#include "brigade/base/check.h"

namespace brigade {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : Store(base ? base->timeout() : std::chrono::milliseconds(0)),
      prefix_(std::move(prefix)),
      base_(std::move(base)) {
  BRIGADE_CHECK(base_ != nullptr) << "PrefixStore needs a base store";
}

std::vector<std::string> PrefixStore::join(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(join(k));
  return out;
}

void PrefixStore::set(const std::string& key, const std::vector<char>& value) {
  base_->set(join(key), value);
}
std::vector<char> PrefixStore::get(const std::string& key) {
  return base_->get(join(key));
}
void PrefixStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  base_->wait(join(keys), timeout);
}
bool PrefixStore::check(const std::vector<std::string>& keys) {
  return base_->check(join(keys));
}
int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return base_->add(join(key), delta);
}
std::string PrefixStore::describe() const {
  return base_->describe() + " (prefix '" + prefix_ + "')";
}

namespace detail {

std::string format_keys(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i == 8) {
      out += ", ... (" + std::to_string(keys.size()) + " keys)";
      break;
    }
    if (i > 0) out += ", ";
    out += keys[i];
  }
  return out + "]";
}

bool parse_int64(const std::string& text, int64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return false;
  *out = v;
  return true;
}

std::string add_overflow_message(const std::string& key, int64_t value, int64_t delta) {
  return fmt::format(
      "add of {} to '{}' refused: its current value {} plus {} overflows int64; the value is "
      "unchanged",
      delta, key, value, delta);
}

}  // namespace detail
}  // namespace brigade
