#pragma once
// metrics.jsonl: one JSON object per line, written with one write(2) per record, so a crashed
// run keeps every step it finished and tools can tail the file while training runs. A record
// that cannot be written (a full disk) is counted and cut off again, never half-written.
//
// Every record carries "time" (UTC, ISO 8601 with ms), "type" ("train": one optimizer step;
// "eval": a validation pass; "event": the start of a segment, ...; "summary": the end of a
// run) and "segment", the invocation that wrote it (0 for the first, +1 at every resume).
// When a run resumes from step s, records of earlier segments with a step after s describe
// steps that are trained again: begin_segment() marks them "superseded": true, so a reader
// that skips superseded records sees each step once, the one that counts. Every field is
// described in docs/metrics.md.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "brigade/base/file_io.h"

namespace brigade {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // Appends to path; the segment is one more than the last one the file holds. Throws IoError.
  explicit MetricsWriter(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  int64_t segment() const { return segment_; }

  // Starts this segment at `step` (0, or the step of the checkpoint it resumed from): marks the
  // earlier segments' records after it superseded (rewriting the file atomically, only if one
  // needs it) and appends an "event" record {"event": "start" or "resume", "step": step}.
  // Returns false if the file could not be rewritten or the record written (see write()).
  bool begin_segment(int64_t step, nlohmann::json details = nlohmann::json::object());

  // Appends `record` with time, type and segment added; false (and failures() grows) if it
  // could not be written, with the reason in last_error(). A no-op returning true when not
  // opened.
  bool write(std::string_view type, nlohmann::json record);
  // Called with every record write() is given (type, and the record as given), whether or not
  // the file took it: another sink of the same records (TensorBoard events). null removes it.
  void set_observer(std::function<void(std::string_view, const nlohmann::json&)> observer) {
    observer_ = std::move(observer);
  }
  int64_t failures() const { return failures_; }
  const std::string& last_error() const { return last_error_; }

 private:
  std::string path_;
  std::unique_ptr<AppendFile> file_;
  std::function<void(std::string_view, const nlohmann::json&)> observer_;
  int64_t segment_ = 0;
  int64_t failures_ = 0;
  std::string last_error_;
};

}  // namespace brigade
