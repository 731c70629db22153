#include "brigade/monitor/tensorboard_writer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>

#include "brigade/base/crc32c.h"
#include "tensorboard_event.pb.h"

namespace brigade {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

tb::Event event_at(int64_t step) {
  tb::Event e;
  e.set_wall_time(now_s());
  e.set_step(step);
  return e;
}

}  // namespace

uint32_t tfrecord_masked_crc(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(std::string_view data) {
  std::string header;
  put_le(header, data.size(), 8);
  std::string out = header;
  put_le(out, tfrecord_masked_crc(header), 4);
  out.append(data);
  put_le(out, tfrecord_masked_crc(data), 4);
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  make_dirs(dir);
  char host[256] = "host";
  ::gethostname(host, sizeof(host) - 1);
  // TensorFlow's name; the sequence number keeps two writers of one process in one second apart.
  static std::atomic<int> sequence{0};
  path_ = fmt::format("{}/events.out.tfevents.{}.{}.{}.{}", dir, static_cast<int64_t>(now_s()),
                      host, static_cast<int>(::getpid()), sequence++);
  file_ = std::make_unique<AppendFile>(path_);
  tb::Event e = event_at(0);
  e.set_file_version("brain.Event:2");
  append(e.SerializeAsString());
}

TensorBoardWriter::~TensorBoardWriter() = default;

bool TensorBoardWriter::append(const std::string& event_bytes) {
  if (file_->append(tfrecord_frame(event_bytes)) == 0) return true;
  ++failures_;
  return false;
}

bool TensorBoardWriter::add_scalars(int64_t step, std::string_view prefix,
                                    const nlohmann::json& record) {
  tb::Event e = event_at(step);
  tb::Summary* s = e.mutable_summary();
  const auto add = [&](const std::string& tag, const nlohmann::json& v) {
    tb::Summary::Value* value = s->add_value();
    value->set_tag(tag);
    value->set_simple_value(v.get<float>());
  };
  for (const auto& [key, v] : record.items()) {
    if (key == "step" || key == "segment") continue;
    if (v.is_number()) add(fmt::format("{}/{}", prefix, key), v);
    if (!v.is_object()) continue;
    // One level of named numbers, e.g. comm_sent_by {"dp/all_reduce": n}.
    for (const auto& [name, x] : v.items()) {
      if (x.is_number()) add(fmt::format("{}/{}/{}", prefix, key, name), x);
    }
  }
  return s->value_size() == 0 || append(e.SerializeAsString());
}

bool TensorBoardWriter::add_scalar(int64_t step, const std::string& tag, double value) {
  tb::Event e = event_at(step);
  tb::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  return append(e.SerializeAsString());
}

bool TensorBoardWriter::add_text(int64_t step, const std::string& tag,
                                 const std::string& markdown) {
  tb::Event e = event_at(step);
  tb::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  tb::TensorProto* t = v->mutable_tensor();
  t->set_dtype(tb::DT_STRING);
  t->mutable_tensor_shape();  // a scalar string
  t->add_string_val(markdown);
  return append(e.SerializeAsString());
}

bool TensorBoardWriter::start_session(int64_t step, const std::string& checkpoint) {
  tb::Event e = event_at(step);
  e.mutable_session_log()->set_status(tb::SessionLog::START);
  e.mutable_session_log()->set_checkpoint_path(checkpoint);
  return append(e.SerializeAsString());
}

}  // namespace brigade
