#include "brigade/data/jsonl_corpus.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/base/json_limits.h"
#include "brigade/data/input_files.h"

namespace brigade {

namespace {

bool is_blank_line(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// Calls on_record(origin, object) for every non-blank line of content, origin being
// "<path>:<line>" (1-based); records_seen counts across files against kMaxJsonlRecords.
template <typename OnRecord>
void for_each_record(std::string_view content, const std::string& path, int64_t& records_seen,
                     OnRecord on_record) {
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    const std::string_view line = content.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (is_blank_line(line)) continue;
    const std::string origin = fmt::format("{}:{}", path, line_no);
    if (static_cast<int64_t>(line.size()) > kMaxJsonlLineBytes) {
      throw IoError(fmt::format("{}: the line holds {} bytes, more than the {} a record may hold",
                                origin, line.size(), kMaxJsonlLineBytes));
    }
    if (++records_seen > kMaxJsonlRecords) {
      throw IoError(
          fmt::format("{}: more than {} records; split the data set or tokenize it "
                      "with `brigade tokenize`",
                      origin, kMaxJsonlRecords));
    }
    const nlohmann::json record = parse_json_bounded(
        line, origin, JsonLimits{.max_bytes = kMaxJsonlLineBytes, .max_depth = kMaxJsonlDepth});
    if (!record.is_object()) {
      throw IoError(fmt::format("{}: a record must be a JSON object, found {}", origin,
                                json_excerpt(record, 60)));
    }
    on_record(origin, record);
  }
}

// The string value of record[field]; IoError naming origin and the field otherwise.
std::string string_field(const nlohmann::json& record, const std::string& field,
                         const std::string& origin) {
  const auto it = record.find(field);
  if (it == record.end()) {
    std::string keys;
    int shown = 0;
    for (const auto& [key, value] : record.items()) {
      if (shown++ == 8) {
        keys += ", ...";
        break;
      }
      keys += (keys.empty() ? "" : ", ") + json_excerpt(nlohmann::json(key), 40);
    }
    throw IoError(fmt::format("{}: the record has no field \"{}\" (its fields: {})", origin, field,
                              keys.empty() ? "none" : keys));
  }
  if (!it->is_string()) {
    throw IoError(fmt::format("{}: field \"{}\" is {} ({}), not a string", origin, field,
                              it->type_name(), json_excerpt(*it, 60)));
  }
  return it->get<std::string>();
}

std::vector<std::string> documents_of(std::string_view content, const std::string& field,
                                      const std::string& path, int64_t& records_seen) {
  std::vector<std::string> docs;
  for_each_record(content, path, records_seen,
                  [&](const std::string& origin, const nlohmann::json& record) {
                    docs.push_back(string_field(record, field, origin));
                  });
  return docs;
}

std::vector<InstructionRecord> instructions_of(std::string_view content,
                                               const std::string& prompt_field,
                                               const std::string& response_field,
                                               const std::string& path, int64_t& records_seen) {
  std::vector<InstructionRecord> out;
  for_each_record(content, path, records_seen,
                  [&](const std::string& origin, const nlohmann::json& record) {
                    out.push_back({string_field(record, prompt_field, origin),
                                   string_field(record, response_field, origin)});
                  });
  return out;
}

}  // namespace

std::vector<std::string> parse_jsonl_documents(std::string_view content, const std::string& field,
                                               const std::string& path) {
  int64_t records = 0;
  return documents_of(content, field, path, records);
}

std::vector<InstructionRecord> parse_jsonl_instructions(std::string_view content,
                                                        const std::string& prompt_field,
                                                        const std::string& response_field,
                                                        const std::string& path) {
  int64_t records = 0;
  return instructions_of(content, prompt_field, response_field, path, records);
}

TextSplits load_jsonl_text(const std::string& spec, const std::string& field, double val_fraction) {
  check_val_fraction(val_fraction);
  TextSplits out;
  int64_t records = 0;
  for (const std::string& file : expand_input_files(spec)) {
    const std::string content = read_file(file, kMaxDataFileBytes);
    out.sources.push_back({file, content.size()});
    add_split_documents(split_name_of(spec, file), documents_of(content, field, file, records),
                        val_fraction, out);
  }
  return out;
}

InstructionSplits load_jsonl_instructions(const std::string& spec, const std::string& prompt_field,
                                          const std::string& response_field, double val_fraction) {
  check_val_fraction(val_fraction);
  InstructionSplits out;
  int64_t records = 0;
  for (const std::string& file : expand_input_files(spec)) {
    const std::string content = read_file(file, kMaxDataFileBytes);
    out.sources.push_back({file, content.size()});
    const std::string name = split_name_of(spec, file);
    std::vector<InstructionRecord> records_of_file =
        instructions_of(content, prompt_field, response_field, file, records);
    for (size_t k = 0; k < records_of_file.size(); ++k) {
      const bool val = is_validation_doc(name, static_cast<int64_t>(k), val_fraction);
      (val ? out.val : out.train).push_back(std::move(records_of_file[k]));
    }
  }
  return out;
}

}  // namespace brigade
