#include "brigade/data/text_corpus.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/data/input_files.h"
#include "brigade/tensor/rng.h"

namespace brigade {

namespace {

constexpr uint64_t kSplitBuckets = 1'000'000;

// Splits content into lines without their "\n".
std::vector<std::string_view> split_lines(std::string_view content) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    lines.push_back(content.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

// The line without trailing whitespace, so "% " and "%\r" still separate fortunes.
std::string_view rstrip(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.remove_suffix(1);
  }
  return line;
}

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
  });
}

}  // namespace

void check_val_fraction(double val_fraction) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    throw ConfigError("data.val_fraction = " + std::to_string(val_fraction) +
                      ": must be in [0, 1)");
  }
}

void add_split_documents(const std::string& name, const std::vector<std::string>& docs,
                         double val_fraction, TextSplits& out) {
  for (size_t k = 0; k < docs.size(); ++k) {
    if (docs[k].empty()) continue;
    const bool val = is_validation_doc(name, static_cast<int64_t>(k), val_fraction);
    std::string& dst = val ? out.val : out.train;
    int64_t& count = val ? out.val_docs : out.train_docs;
    if (count > 0) dst += kDocSeparator;
    dst += docs[k];
    ++count;
  }
}

bool is_validation_doc(std::string_view name, int64_t index, double val_fraction) {
  const uint64_t threshold = static_cast<uint64_t>(std::llround(val_fraction * kSplitBuckets));
  return mix_keys(hash_name(name), static_cast<uint64_t>(index)) % kSplitBuckets < threshold;
}

std::string clean_document(std::string_view text) {
  std::string buf;
  buf.reserve(text.size());
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '\b') {
      if (!buf.empty() && buf.back() != '\n') buf.pop_back();
    } else if (c == '\n' || c == '\t' || (c >= 0x20 && c != 0x7f)) {
      buf.push_back(ch);
    }
  }
  std::string out;
  out.reserve(buf.size());
  for (std::string_view line : split_lines(buf)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    if (line.empty() && out.empty()) continue;  // leading blank lines
    out += line;
    out += '\n';
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();  // trailing blank lines
  return out;
}

namespace {

// Splits content into cleaned, non-empty documents at every line for which is_separator holds
// (separator lines belong to no document).
template <typename IsSeparator>
std::vector<std::string> split_documents(std::string_view content, IsSeparator is_separator) {
  std::vector<std::string> docs;
  std::string current;
  auto flush = [&] {
    std::string doc = clean_document(current);
    if (!doc.empty()) docs.push_back(std::move(doc));
    current.clear();
  };
  for (std::string_view line : split_lines(content)) {
    if (is_separator(line)) {
      flush();
    } else {
      current += line;
      current += '\n';
    }
  }
  flush();
  return docs;
}

}  // namespace

std::vector<std::string> parse_fortunes(std::string_view content) {
  return split_documents(content, [](std::string_view line) { return rstrip(line) == "%"; });
}

std::vector<std::string> parse_paragraphs(std::string_view content) {
  return split_documents(content, [](std::string_view line) { return is_blank(line); });
}

std::vector<std::string> list_fortune_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw IoError(dir + ": fortunes directory not found (install the Debian 'fortunes' package)");
  }
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.has_extension()) continue;  // *.dat indexes, *.u8 links
    if (!fs::is_regular_file(p, ec)) continue;
    files.push_back(p);
  }
  if (ec) throw IoError(dir + ": cannot list directory: " + ec.message());
  if (files.empty()) throw IoError(dir + ": no fortune files (names without an extension)");
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  std::vector<std::string> out;
  for (const fs::path& p : files) out.push_back(p.string());
  return out;
}

TextSplits load_fortunes(const std::string& dir, double val_fraction) {
  check_val_fraction(val_fraction);
  TextSplits out;
  for (const std::string& path : list_fortune_files(dir)) {
    const std::string content = read_file(path, kMaxDataFileBytes);
    out.sources.push_back({path, content.size()});
    add_split_documents(std::filesystem::path(path).filename().string(), parse_fortunes(content),
                        val_fraction, out);
  }
  return out;
}

TextSplits load_text_file(const std::string& path, double val_fraction) {
  check_val_fraction(val_fraction);
  const std::string content = read_file(path, kMaxDataFileBytes);
  TextSplits out;
  out.sources.push_back({path, content.size()});
  add_split_documents(std::filesystem::path(path).filename().string(), parse_paragraphs(content),
                      val_fraction, out);
  return out;
}

std::string split_name_of(const std::string& spec, const std::string& file) {
  namespace fs = std::filesystem;
  fs::path root;
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {
    root = spec;
  } else if (is_glob_pattern(spec)) {
    // The folders before the first component with a wildcard.
    for (const fs::path& part : fs::path(spec).parent_path()) {
      if (is_glob_pattern(part.string())) break;
      root /= part;
    }
  } else {
    root = fs::path(file).parent_path();
  }
  if (root.empty()) root = ".";  // "*/a.txt", "a.txt": relative to the working folder
  const std::string name = fs::path(file).lexically_relative(root).generic_string();
  // A file outside the root cannot happen for expand_input_files' results; fall back to the
  // base name rather than a name starting with "..".
  if (name.empty() || name.rfind("..", 0) == 0) return fs::path(file).filename().string();
  return name;
}

TextSplits load_text_files(const std::string& spec, double val_fraction) {
  check_val_fraction(val_fraction);
  TextSplits out;
  for (const std::string& file : expand_input_files(spec)) {
    const std::string content = read_file(file, kMaxDataFileBytes);
    out.sources.push_back({file, content.size()});
    add_split_documents(split_name_of(spec, file), parse_paragraphs(content), val_fraction, out);
  }
  return out;
}

}  // namespace brigade
