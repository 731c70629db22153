#pragma once
// Parsing JSON that came from a file or a peer (safetensors headers, HF config.json, checkpoint
// manifests, control messages), and quoting it in error messages.
//
// nlohmann::json parses iteratively, but dump(), comparison and copying of a value recurse once
// per nesting level, so a header of 100,000 '[' parses and then crashes the process (stack
// overflow) as soon as an error message quotes it. Untrusted text is therefore bounded in size
// and in nesting depth before the parser sees it, and error messages quote an excerpt of a value,
// never the whole of it.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace brigade {

struct JsonLimits {
  int64_t max_bytes = 64 << 20;  // the text, in bytes
  int max_depth = 64;            // arrays and objects inside each other
};

// Parses untrusted JSON text. Throws IoError("<origin>: ...") if text is larger than max_bytes,
// nests deeper than max_depth (checked by a scan before parsing, so no recursion ever sees deep
// input), or is not valid JSON (including invalid UTF-8).
nlohmann::json parse_json_bounded(std::string_view text, const std::string& origin,
                                  JsonLimits limits = {});

// The nesting depth of text's first max_depth + 1 levels: the deepest level of '[' / '{' outside
// strings, stopping the scan at the first level past max_depth (returns max_depth + 1 then).
// Exact for valid JSON; for invalid JSON it is never less than what a parser reaches before it
// fails, because the scan and the parser agree on where strings start and end up to the first
// error.
int json_nesting_depth(std::string_view text, int max_depth);

// At most max_chars of j.dump() (compact), with "..." when cut; invalid UTF-8 in strings is
// replaced rather than thrown. Bounded in time and stack on any value: containers deeper than 64
// levels are shown as "...".
std::string json_excerpt(const nlohmann::json& j, size_t max_chars = 120);

}  // namespace brigade
