#pragma once
// JSONL corpora (HF datasets style): one JSON object per line, each record one document
// (data.text_field) or one instruction example (data.prompt_field + data.response_field).
//
// Bounds, since every byte comes from a file: a line holds at most kMaxJsonlLineBytes and nests
// at most kMaxJsonlDepth levels, a load reads at most kMaxJsonlRecords records. Blank lines
// (only whitespace) are skipped; every other line must be an object whose field is a string. A
// line that breaks a rule is an IoError "<file>:<line>: <what is wrong>", never a silent skip.
//
// Field values are taken verbatim (JSON already says exactly what the text is: no paragraph
// cleaning, which would drop the trailing space of a prompt such as "Answer: ").
//
// Split: record k (0-based over the non-blank lines of a file) goes to validation by
// is_validation_doc(split_name_of(spec, file), k, val_fraction), the rule of text files
// (data/text_corpus.h), so it does not depend on where the files live or on loading order.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "brigade/data/text_corpus.h"

namespace brigade {

inline constexpr int64_t kMaxJsonlLineBytes = int64_t{16} << 20;
inline constexpr int kMaxJsonlDepth = 32;
inline constexpr int64_t kMaxJsonlRecords = int64_t{50'000'000};

// The string `field` of every record of one JSONL file's content, in order (empty strings
// included, so index k is record k). path names the file in errors.
std::vector<std::string> parse_jsonl_documents(std::string_view content, const std::string& field,
                                               const std::string& path);

struct InstructionRecord {
  std::string prompt;
  std::string response;
};

// The (prompt_field, response_field) strings of every record, in order; errors as above.
std::vector<InstructionRecord> parse_jsonl_instructions(std::string_view content,
                                                        const std::string& prompt_field,
                                                        const std::string& response_field,
                                                        const std::string& path);

// Every file spec names (data/input_files.h), each record's `field` one document, split by the
// rule above. Errors as expand_input_files and the parsers; ConfigError for val_fraction.
TextSplits load_jsonl_text(const std::string& spec, const std::string& field,
                           double val_fraction = kDefaultValFraction);

struct InstructionSplits {
  std::vector<InstructionRecord> train;
  std::vector<InstructionRecord> val;
  std::vector<SourceFile> sources;  // the files read, in reading order
};

// Every file spec names, each record one example, split by the rule above.
InstructionSplits load_jsonl_instructions(const std::string& spec, const std::string& prompt_field,
                                          const std::string& response_field,
                                          double val_fraction = kDefaultValFraction);

}  // namespace brigade
