#pragma once
// A brigade tokenizer as a Hugging Face `tokenizers` file (tokenizer.json), so that
// `PreTrainedTokenizerFast(tokenizer_file=...)` / `AutoTokenizer` tokenize exactly as the model
// was trained (docs/hf-interop.md).
//
// The file describes brigade's byte-level BPE in HF's terms:
//   pre_tokenizer  Sequence[Split(regex, "Isolated"), ByteLevel(use_regex = false)]: the regex
//                  cuts the text into bpe_pretokenize's pre-tokens (data/bpe.h), ByteLevel maps
//                  each byte to GPT-2's printable stand-in character (bytes_to_unicode);
//   model          BPE: vocab "stand-in string" -> id (ids 0..255 the bytes, 256 + i merge i),
//                  merges in learned order (HF applies the lowest-ranked pair first, as brigade);
//   decoder        ByteLevel (stand-ins back to bytes).
// A byte tokenizer is the same without merges. HF tokenizers hold text, not bytes: input that is
// not valid UTF-8 cannot reach them, which brigade's tokenizers would accept.
#include <string>

#include "brigade/data/bpe.h"

namespace brigade {

// The regex (Oniguruma/Python syntax) whose matches, in order, are bpe_pretokenize's pre-tokens.
std::string hf_pretokenizer_regex();

// GPT-2's printable stand-in for byte b (bytes_to_unicode), UTF-8 encoded.
std::string byte_level_char(unsigned char b);

// tokenizer.json for this tokenizer. ConfigError when two ids stand for the same bytes (HF's
// vocabulary maps each string to one id), naming both.
std::string hf_tokenizer_json(const BpeTokenizer& tokenizer);

// tokenizer_config.json: the class AutoTokenizer loads the file with, and the context length.
std::string hf_tokenizer_config_json(int64_t model_max_length);

}  // namespace brigade
