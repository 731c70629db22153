#include "brigade/data/hf_tokenizer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "brigade/base/error.h"

namespace brigade {

namespace {

// The code point of byte b's stand-in: printable Latin-1 bytes stand for themselves, the other
// 68 bytes take 256, 257, ... in byte order (GPT-2's encoder.py).
uint32_t byte_level_code_point(unsigned char b) {
  auto printable = [](int c) {
    return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
  };
  if (printable(b)) return b;
  uint32_t n = 0;
  for (int c = 0; c < b; ++c) n += printable(c) ? 0 : 1;
  return 256 + n;
}

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {  // every stand-in is below 0x800: two bytes
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

std::string byte_level_string(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) out += byte_level_char(b);
  return out;
}

}  // namespace

std::string hf_pretokenizer_regex() {
  // Whitespace is exactly bpe_pretokenize's: the ASCII space, \t, \n, \v, \f, \r.
  const std::string ws = "[ \\t\\n\\x0B\\f\\r]", word = "[^ \\t\\n\\x0B\\f\\r]";
  // " word" or "word"; a whitespace run that leaves its last space to a following word; any
  // other whitespace run whole.
  return " ?" + word + "+|" + ws + "+(?= " + word + ")|" + ws + "+";
}

std::string byte_level_char(unsigned char b) {
  return utf8(byte_level_code_point(b));
}

std::string hf_tokenizer_json(const BpeTokenizer& tokenizer) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  std::unordered_map<std::string, int32_t> seen;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::string s = byte_level_string(tokenizer.token_bytes(id));
    const auto [it, fresh] = seen.emplace(s, id);
    if (!fresh) {
      throw ConfigError(
          fmt::format("tokenizer ids {} and {} both stand for the bytes of \"{}\": a Hugging Face "
                      "vocabulary maps each string to one id, so this tokenizer cannot be exported",
                      it->second, id, s));
    }
    vocab[s] = id;
  }
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  for (const auto& [left, right] : tokenizer.merges()) {
    // Stand-in strings hold no plain space (space is "Ġ"): "left right" is unambiguous.
    merges.push_back(byte_level_string(tokenizer.token_bytes(left)) + " " +
                     byte_level_string(tokenizer.token_bytes(right)));
  }
  const nlohmann::ordered_json byte_level = {{"type", "ByteLevel"},
                                             {"add_prefix_space", false},
                                             {"trim_offsets", false},
                                             {"use_regex", false}};
  nlohmann::ordered_json j = {{"version", "1.0"},
                              {"truncation", nullptr},
                              {"padding", nullptr},
                              {"added_tokens", nlohmann::ordered_json::array()},
                              {"normalizer", nullptr},
                              {"pre_tokenizer",
                               {{"type", "Sequence"},
                                {"pretokenizers",
                                 {{{"type", "Split"},
                                   {"pattern", {{"Regex", hf_pretokenizer_regex()}}},
                                   {"behavior", "Isolated"},
                                   {"invert", false}},
                                  byte_level}}}},
                              {"post_processor", nullptr},
                              {"decoder", byte_level},
                              {"model",
                               {{"type", "BPE"},
                                {"dropout", nullptr},
                                {"unk_token", nullptr},
                                {"continuing_subword_prefix", nullptr},
                                {"end_of_word_suffix", nullptr},
                                {"fuse_unk", false},
                                {"byte_fallback", false},
                                {"vocab", vocab},
                                {"merges", merges}}}};
  return j.dump(2) + "\n";
}

std::string hf_tokenizer_config_json(int64_t model_max_length) {
  const nlohmann::ordered_json j = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                    {"model_max_length", model_max_length},
                                    {"clean_up_tokenization_spaces", false}};
  return j.dump(2) + "\n";
}

}  // namespace brigade
