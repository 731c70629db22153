#include "brigade/monitor/metrics.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/base/json_limits.h"
#include "brigade/monitor/utc_time.h"

namespace brigade {

namespace {

// Larger files are not rewritten on resume (the marking is skipped, with a failure counted).
constexpr int64_t kMaxRewriteBytes = int64_t{1} << 30;

// The records of an existing metrics file, each with its text; lines that do not parse (a torn
// last line of a crashed writer, a person's edit) are kept as they are, with a null record.
struct Line {
  std::string text;
  nlohmann::json record;
};

std::vector<Line> read_lines(const std::string& path) {
  std::vector<Line> out;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || st.st_size == 0) return out;
  const std::string text = read_file(path, kMaxRewriteBytes);
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    Line line{text.substr(at, end - at), nullptr};
    try {
      line.record = parse_json_bounded(line.text, path, JsonLimits{.max_bytes = 1 << 24});
    } catch (const IoError&) {
    }
    out.push_back(std::move(line));
    at = end + 1;
  }
  return out;
}

int64_t int_field(const nlohmann::json& r, const char* key, int64_t fallback) {
  if (!r.is_object()) return fallback;
  const auto it = r.find(key);
  return it != r.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  int64_t last = -1;
  bool torn = false;  // the last line has no newline (a writer killed mid-record)
  try {
    for (const Line& l : read_lines(path)) last = std::max(last, int_field(l.record, "segment", 0));
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && st.st_size > 0) {
      const std::string text = read_file(path, kMaxRewriteBytes);
      torn = text.back() != '\n';
    }
  } catch (const IoError&) {
    last = 0;  // unreadable or too large to scan: still a later segment than the first
  }
  segment_ = last + 1;
  file_ = std::make_unique<AppendFile>(path);
  if (torn) (void)file_->append("\n");  // so the next record starts a line of its own
}

MetricsWriter::~MetricsWriter() = default;

bool MetricsWriter::begin_segment(int64_t step, nlohmann::json details) {
  bool ok = true;
  if (segment_ > 0) {
    try {
      std::vector<Line> lines = read_lines(path_);
      bool changed = false;
      for (Line& l : lines) {
        const nlohmann::json& r = l.record;
        if (!r.is_object() || int_field(r, "segment", 0) >= segment_ ||
            int_field(r, "step", -1) <= step || r.value("superseded", false) ||
            r.value("type", "") == "event") {
          continue;
        }
        nlohmann::json marked = r;
        marked["superseded"] = true;
        l.text = marked.dump();
        changed = true;
      }
      if (changed) {
        std::string text;
        for (const Line& l : lines) text += l.text + "\n";
        write_file_atomic(path_, text);
        file_ = std::make_unique<AppendFile>(path_);  // the old descriptor names the old file
      }
    } catch (const IoError& e) {
      ++failures_;
      last_error_ = "cannot mark the superseded records of " + path_ + ": " + e.what();
      ok = false;
    }
  }
  details["event"] = segment_ == 0 ? "start" : "resume";
  details["step"] = step;
  return write("event", std::move(details)) && ok;
}

bool MetricsWriter::write(std::string_view type, nlohmann::json record) {
  if (observer_) observer_(type, record);
  if (!file_) return true;
  record["time"] = utc_now_iso8601();
  record["type"] = type;
  record["segment"] = segment_;
  if (const int err = file_->append(record.dump() + "\n")) {
    ++failures_;
    last_error_ = "cannot write " + file_->path() + ": " + std::strerror(err);
    return false;
  }
  return true;
}

}  // namespace brigade
