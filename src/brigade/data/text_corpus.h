#pragma once
// Plain-text corpora for language-model runs, split into train and validation by document.
//
// The default corpus is the Debian `fortunes` package: every file without an extension in
// /usr/share/games/fortunes (*.dat indexes and *.u8 links are skipped), sorted by name. Inside a
// file, fortunes are separated by lines holding only "%". Each fortune is a document.
//
// Cleaning (so the model sees clean text): "\r" is dropped, a backspace erases the character
// before it (fortunes underline and embolden by overstriking), other control characters except
// "\n" and "\t" are dropped, trailing whitespace of each line and leading/trailing blank lines
// of the document are removed, and documents left empty are skipped.
//
// Split: document k (0-based, counting kept documents) of the source named `name` goes to
// validation iff mix_keys(hash_name(name), k) % 1'000'000 < round(val_fraction * 1e6); see
// is_validation_doc. The name is the file's path relative to its root (split_name_of): the
// fortunes directory, or for data.path the folder named, the leading folder of a glob that holds
// no wildcard, or a single file's own folder (so a file's name is its base name however it is
// named: "corpus/a.txt", "corpus" and "corpus/*.txt" all call it "a.txt"; and "x/a.txt" and
// "y/a.txt" in one folder keep two split sequences). The split therefore does not depend on where
// the corpus lives, on other files, or on the order of loading.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace brigade {

inline constexpr const char* kDefaultFortunesDir = "/usr/share/games/fortunes";
inline constexpr double kDefaultValFraction = 0.05;
// Written between consecutive documents of a split.
inline constexpr std::string_view kDocSeparator = "\n\n";

struct SourceFile {
  std::string path;
  uint64_t size_bytes = 0;
};

struct TextSplits {
  std::string train;  // train documents joined by kDocSeparator
  std::string val;    // validation documents joined by kDocSeparator
  int64_t train_docs = 0;
  int64_t val_docs = 0;
  std::vector<SourceFile> sources;  // the files read, in reading order (for the run manifest)
};

// Whether document `index` of source `name` belongs to the validation split (rule above).
bool is_validation_doc(std::string_view name, int64_t index, double val_fraction);

// Applies the cleaning rules above to one document; may return "".
std::string clean_document(std::string_view text);

// The cleaned, non-empty fortunes of one fortune file's content, in order.
std::vector<std::string> parse_fortunes(std::string_view content);

// The cleaned, non-empty paragraphs (separated by one or more blank lines) of a text, in order.
std::vector<std::string> parse_paragraphs(std::string_view content);

// The fortune files of dir (names without an extension, regular files), sorted by name; each is
// split under its file name. IoError naming dir if it is missing or holds none.
std::vector<std::string> list_fortune_files(const std::string& dir);

// Loads a fortunes directory. IoError naming the path if dir is missing or holds no fortune
// file or a file cannot be read; ConfigError unless 0 <= val_fraction < 1.
TextSplits load_fortunes(const std::string& dir = kDefaultFortunesDir,
                         double val_fraction = kDefaultValFraction);

// Loads a user's plain-text file, one document per paragraph, split by the same rule.
// IoError naming the path if it is missing or unreadable; ConfigError as above.
TextSplits load_text_file(const std::string& path, double val_fraction = kDefaultValFraction);

// Loads every file that spec names (a file, a folder or a glob; data/input_files.h), in sorted
// order, one document per paragraph, each file split under its split_name_of name. IoError as
// expand_input_files or naming the unreadable file; ConfigError as above.
TextSplits load_text_files(const std::string& spec, double val_fraction = kDefaultValFraction);

// The name under which `file`, one of expand_input_files(spec), is split: its path relative to
// spec's root (the folder spec names; a glob's leading wildcard-free folders; a file's folder).
std::string split_name_of(const std::string& spec, const std::string& file);

// Appends documents 0..n-1 of source `name` to out's train or validation text by
// is_validation_doc; empty documents keep their index but add no text.
void add_split_documents(const std::string& name, const std::vector<std::string>& docs,
                         double val_fraction, TextSplits& out);

// ConfigError naming data.val_fraction unless it is in [0, 1).
void check_val_fraction(double val_fraction);

}  // namespace brigade
