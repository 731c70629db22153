#pragma once
// Bounds on TOML text, checked before toml11 sees it.
//
// toml11 parses arrays and inline tables by recursion, one stack frame chain per level: a value
// nested 10,000 deep overflows the stack (SIGSEGV) and 4,000 deep already takes seconds to fail.
// It is also slow on plain large input: about 5 us per token, and quadratic in the length of a
// line (a 64 KiB line of "1," takes 1.5 s, 1 MiB of such lines minutes). A pre-scan that
// understands just enough TOML to tell structure from text (strings of all four kinds,
// comments, keys) refuses such input first, with limits far above any real config (the
// largest in configs/ is 569 bytes, a resolved one about 3 KiB), so a valid config is never
// refused and no config takes more than a fraction of a second to parse.
#include <cstdint>
#include <string>
#include <string_view>

namespace brigade {

struct TomlLimits {
  int64_t max_bytes = 64 << 10;       // the text, in bytes (a config is a few KiB)
  int64_t max_line_bytes = 16 << 10;  // one line, newline excluded
  int max_depth = 32;                 // arrays and inline tables inside each other
  int max_key_parts = 32;             // parts of one dotted key ("a.b.c" has 3), tables headers too
};

// Throws ConfigError("<origin>: ...", with the line number) if text is larger than max_bytes,
// has a line longer than max_line_bytes, nests arrays / inline tables deeper than max_depth, or
// has a dotted key of more than max_key_parts parts. Text inside strings and comments is skipped;
// text that is not valid TOML passes unless it breaks a limit (toml11 then reports the syntax
// error).
void check_toml_limits(std::string_view text, const std::string& origin, TomlLimits limits = {});

}  // namespace brigade
