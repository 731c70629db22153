#pragma once
// TensorBoard event files (runs/<name>/tb/events.out.tfevents.<time>.<host>.<pid>), what
// `tensorboard --logdir runs/` reads. The format: TFRecord framing around serialized Event
// protobufs of the published schema (monitor/proto/tensorboard_event.proto, TensorFlow's field
// numbers). Each record is
//
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   length bytes of Event         | uint32 masked CRC-32C of those bytes
//
// with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. The first record is the file_version
// event "brain.Event:2". Scalars are Summary values with simple_value; text (the config) uses the
// text plugin (a DT_STRING tensor, plugin_name "text"). A resumed run writes a SessionLog START at
// the first step it trains again; TensorBoard then drops the earlier points at and after that
// step (the points metrics.jsonl marks superseded). Like metrics.jsonl, a record that cannot be
// written is counted and cut off, never half-written.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "brigade/base/file_io.h"

namespace brigade {

// One TFRecord record around `data` (exposed for tests).
std::string tfrecord_frame(std::string_view data);
uint32_t tfrecord_masked_crc(std::string_view bytes);

class TensorBoardWriter {
 public:
  // Creates dir and a new event file in it. Throws IoError.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();

  const std::string& path() const { return path_; }

  // Every number of `record` (bools and the bookkeeping fields step, segment, time excluded) as
  // the scalar "<prefix>/<key>" at `step`, in one event; the numbers of an object member (one
  // level deep) as "<prefix>/<key>/<name>".
  bool add_scalars(int64_t step, std::string_view prefix, const nlohmann::json& record);
  // One scalar.
  bool add_scalar(int64_t step, const std::string& tag, double value);
  // Markdown text (the text plugin).
  bool add_text(int64_t step, const std::string& tag, const std::string& markdown);
  // The run trains again from `step` on: the earlier points at and after it are replaced.
  bool start_session(int64_t step, const std::string& checkpoint);

  int64_t failures() const { return failures_; }

 private:
  bool append(const std::string& event_bytes);

  std::string path_;
  std::unique_ptr<AppendFile> file_;
  int64_t failures_ = 0;
};

}  // namespace brigade
