#pragma once
// Enums that a config names by string ("ddp", "diloco", ...): the string is parsed once, where the
// config is read, and the code after compares enumerators, not text. An enum takes part by
// specialising EnumNames with its names in enumerator order:
//
//   template <> struct EnumNames<SyncKind> {
//     static constexpr std::array<std::string_view, 2> kNames = {"ddp", "diloco"};
//   };
//
// It then formats as its name (fmt, streams), converts to JSON as its name, and parses with
// parse_enum.
#include <fmt/format.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace brigade {

template <typename E>
struct EnumNames;

template <typename E>
concept NamedEnum = std::is_enum_v<E> && requires {
  EnumNames<E>::kNames;
};

template <NamedEnum E>
constexpr std::string_view name_of(E e) {
  return EnumNames<E>::kNames[static_cast<size_t>(e)];
}

// The enumerator named `name` exactly; nullopt for any other text.
template <NamedEnum E>
constexpr std::optional<E> parse_enum(std::string_view name) {
  for (size_t i = 0; i < EnumNames<E>::kNames.size(); ++i) {
    if (EnumNames<E>::kNames[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

// "\"ddp\", \"diloco\"": every name, quoted, for messages that list what is allowed.
template <NamedEnum E>
std::string enum_choices() {
  std::string out;
  for (std::string_view n : EnumNames<E>::kNames) {
    out += fmt::format("{}\"{}\"", out.empty() ? "" : ", ", n);
  }
  return out;
}

// Streams (test failure messages, BRIGADE_CHECK) show the name too.
template <NamedEnum E>
std::ostream& operator<<(std::ostream& os, E e) {
  return os << name_of(e);
}

// JSON (run records, summaries, checkpoints' sync records) holds the name.
template <NamedEnum E>
void to_json(nlohmann::json& j, E e) {
  j = std::string(name_of(e));
}

}  // namespace brigade

template <brigade::NamedEnum E>
struct fmt::formatter<E> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(E e, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(brigade::name_of(e), ctx);
  }
};
