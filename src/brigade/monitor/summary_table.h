#pragma once
// The run summary as a person reads it at the end of train.log: one "key  value" row per
// field, keys aligned, numbers rounded to what is worth reading, lists and nested records on
// one line, a multi-line text (the communicator's per-op table) indented below its key. The
// exact values stay in metrics.jsonl's summary record.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace brigade {

std::vector<std::string> summary_table(const nlohmann::json& summary);

}  // namespace brigade
