// A JSONL data file as `brigade train` reads it with data.source = "jsonl": every record's
// "text" as a document (load_jsonl_text), then every record as an instruction example
// (load_jsonl_instructions, InstructionDataset with byte tokens, every example filled, so no
// record the parser accepts can trip a check of the dataset).
#include <nlohmann/json.hpp>

#include "brigade/data/byte_tokenizer.h"
#include "brigade/data/instruction_dataset.h"
#include "brigade/data/jsonl_corpus.h"
#include "fuzz/fuzz_target.h"

namespace brigade::fuzz {

namespace {

class JsonlTarget final : public Target {
 public:
  explicit JsonlTarget(const std::string& dir) : path_(dir + "/fuzz.jsonl") {}

  std::vector<std::string> seeds() override {
    std::string records, crlf;
    for (int i = 0; i < 12; ++i) {
      const nlohmann::json r = {{"text", "document " + std::to_string(i) + " caf\u00e9\n\nend"},
                                {"prompt", "Q: " + std::to_string(i) + " + 1?\nA: "},
                                {"response", std::to_string(i + 1)},
                                {"meta", {{"id", i}, {"tags", {"a", "b"}}}}};
      records += r.dump() + "\n";
      crlf += r.dump() + "\r\n \r\n";  // CRLF line ends, blank lines between records
    }
    return {records, crlf};
  }

  Outcome run(std::string_view input) override {
    write_scratch(path_, input);
    (void)load_jsonl_text(path_, "text", 0.25);
    const InstructionSplits splits = load_jsonl_instructions(path_, "prompt", "response", 0.25);
    const ByteTokenizer bytes;
    for (const auto* records : {&splits.train, &splits.val}) {
      if (records->empty()) continue;
      const InstructionDataset ds(*records, bytes, 16, "a split of " + path_);
      Batch b = ds.make_batch(1);
      for (int64_t k = 0; k < ds.size(); ++k) ds.fill(b, &k, 1);
    }
    return {};
  }

  std::string names() const override { return path_; }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<Target> make_jsonl_target(const std::string& dir) {
  return std::make_unique<JsonlTarget>(dir);
}

}  // namespace brigade::fuzz
