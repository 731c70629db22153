#include "brigade/runtime/config.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <toml.hpp>
#include <variant>

#include "brigade/base/error.h"
#include "brigade/base/nearest_name.h"
#include "brigade/runtime/toml_limits.h"

namespace brigade {

namespace {

using FieldTarget = std::variant<int64_t*, double*, std::string*, bool*, std::vector<int64_t>*,
                                 std::vector<std::string>*, ModelKind*, SyncKind*, ResumeMode*,
                                 DataSource*, TokenizerKind*, RecomputeMode*, OnNonfinite*>;

struct Field {
  const char* section;
  const char* key;
  FieldTarget target;
};

// The schema: every configurable field, once. Parsing, unknown-key detection and the
// resolved TOML output all walk this table.
std::vector<Field> fields(Config& c) {
  return {
      {"run", "name", &c.run.name},
      {"run", "out_dir", &c.run.out_dir},
      {"run", "seed", &c.run.seed},
      {"run", "resume", &c.run.resume},
      {"run", "stop_after", &c.run.stop_after},
      {"model", "kind", &c.model.kind},
      {"model", "vocab", &c.model.vocab},
      {"model", "seq_len", &c.model.seq_len},
      {"model", "d_model", &c.model.d_model},
      {"model", "n_layer", &c.model.n_layer},
      {"model", "n_head", &c.model.n_head},
      {"model", "n_experts", &c.model.n_experts},
      {"model", "moe_top_k", &c.model.moe_top_k},
      {"model", "capacity_factor", &c.model.capacity_factor},
      {"model", "aux_loss_coef", &c.model.aux_loss_coef},
      {"model", "moe_every", &c.model.moe_every},
      {"model", "hidden", &c.model.hidden},
      {"model", "channels", &c.model.channels},
      {"lora", "rank", &c.model.lora_rank},
      {"lora", "alpha", &c.model.lora_alpha},
      {"lora", "targets", &c.model.lora_targets},
      {"data", "source", &c.data.source},
      {"data", "path", &c.data.path},
      {"data", "text_field", &c.data.text_field},
      {"data", "prompt_field", &c.data.prompt_field},
      {"data", "response_field", &c.data.response_field},
      {"data", "tokenizer", &c.data.tokenizer},
      {"data", "seq_len", &c.data.seq_len},
      {"data", "val_fraction", &c.data.val_fraction},
      {"train", "micro_batch", &c.train.micro_batch},
      {"train", "grad_accum", &c.train.grad_accum},
      {"train", "steps", &c.train.steps},
      {"train", "optimizer", &c.train.optimizer},
      {"train", "lr", &c.train.lr},
      {"train", "min_lr", &c.train.min_lr},
      {"train", "warmup", &c.train.warmup},
      {"train", "weight_decay", &c.train.weight_decay},
      {"train", "beta1", &c.train.beta1},
      {"train", "beta2", &c.train.beta2},
      {"train", "eps", &c.train.eps},
      {"train", "momentum", &c.train.momentum},
      {"train", "nesterov", &c.train.nesterov},
      {"train", "grad_clip", &c.train.grad_clip},
      {"train", "eval_every", &c.train.eval_every},
      {"train", "eval_batches", &c.train.eval_batches},
      {"train", "ckpt_every", &c.train.ckpt_every},
      {"train", "keep_checkpoints", &c.train.keep_checkpoints},
      {"train", "async_checkpoint", &c.train.async_checkpoint},
      {"train", "log_every", &c.train.log_every},
      {"train", "blas_threads", &c.train.blas_threads},
      {"train", "kernels", &c.train.kernels},
      {"train", "precision", &c.train.precision},
      {"train", "recompute", &c.train.recompute},
      {"train", "on_nonfinite", &c.train.on_nonfinite},
      {"train", "straggler_threshold", &c.train.straggler_threshold},
      {"train", "init_from", &c.train.init_from},
      {"train", "freeze", &c.train.freeze},
      {"parallel", "dp", &c.parallel.dp},
      {"parallel", "bucket_mb", &c.parallel.bucket_mb},
      {"parallel", "grad_wire", &c.parallel.grad_wire},
      {"parallel", "zero", &c.parallel.zero},
      {"parallel", "tp", &c.parallel.tp},
      {"parallel", "pp", &c.parallel.pp},
      {"parallel", "ep", &c.parallel.ep},
      {"parallel", "sequence_parallel", &c.parallel.sequence_parallel},
      {"parallel", "overlap_grad_reduce", &c.parallel.overlap_grad_reduce},
      {"parallel", "schedule", &c.parallel.schedule},
      {"parallel", "virtual_stages", &c.parallel.virtual_stages},
      {"parallel", "layer_split", &c.parallel.layer_split},
      {"sync", "method", &c.sync.method},
      {"sync", "payload", &c.sync.payload},
      {"sync", "inner_steps", &c.sync.inner_steps},
      {"sync", "outer_lr", &c.sync.outer_lr},
      {"sync", "outer_momentum", &c.sync.outer_momentum},
      {"sync", "nesterov", &c.sync.nesterov},
      {"sync", "fragments", &c.sync.fragments},
      {"sync", "int8_chunk", &c.sync.int8_chunk},
      {"sync", "dct_k", &c.sync.dct_k},
      {"sync", "dct_chunk", &c.sync.dct_chunk},
      {"sync", "dct_values", &c.sync.dct_values},
      {"sync", "residual_decay", &c.sync.residual_decay},
      {"sync", "sign_block", &c.sync.sign_block},
      {"sync", "quorum", &c.sync.quorum},
      {"sync", "outer_deadline_s", &c.sync.outer_deadline_s},
      {"sync", "quorum_retries", &c.sync.quorum_retries},
      {"sync", "outer_aggregator", &c.sync.outer_aggregator},
      {"sync", "outer_trim_fraction", &c.sync.outer_trim_fraction},
      {"sync", "outer_byzantine", &c.sync.outer_byzantine},
      {"sync", "outer_norm_bound", &c.sync.outer_norm_bound},
      {"sync", "demo_beta", &c.sync.demo_beta},
      {"sync", "demo_k", &c.sync.demo_k},
      {"sync", "demo_max_chunk", &c.sync.demo_max_chunk},
      {"sync", "powersgd_rank", &c.sync.powersgd_rank},
      {"sync", "topk_fraction", &c.sync.topk_fraction},
      {"sync", "topk_k", &c.sync.topk_k},
      {"ps", "servers", &c.ps.servers},
      {"ps", "consistency", &c.ps.consistency},
      {"ps", "staleness", &c.ps.staleness},
      {"ps", "staleness_lr", &c.ps.staleness_lr},
      {"ps", "aggregate", &c.ps.aggregate},
      {"ps", "worker_timeout_s", &c.ps.worker_timeout_s},
      {"ps", "assignment", &c.ps.assignment},
      {"ps", "bind", &c.ps.bind},
      {"fed", "rounds", &c.fed.rounds},
      {"fed", "clients_per_round", &c.fed.clients_per_round},
      {"fed", "min_clients", &c.fed.min_clients},
      {"fed", "local_epochs", &c.fed.local_epochs},
      {"fed", "local_steps", &c.fed.local_steps},
      {"fed", "round_deadline_s", &c.fed.round_deadline_s},
      {"fed", "round_retries", &c.fed.round_retries},
      {"fed", "strategy", &c.fed.strategy},
      {"fed", "mu", &c.fed.mu},
      {"fed", "server_optimizer", &c.fed.server_optimizer},
      {"fed", "server_lr", &c.fed.server_lr},
      {"fed", "server_momentum", &c.fed.server_momentum},
      {"fed", "server_beta1", &c.fed.server_beta1},
      {"fed", "server_beta2", &c.fed.server_beta2},
      {"fed", "server_tau", &c.fed.server_tau},
      {"fed", "client_data", &c.fed.client_data},
      {"fed", "test_data", &c.fed.test_data},
      {"fed", "eval_every", &c.fed.eval_every},
      {"fed", "ckpt_every", &c.fed.ckpt_every},
      {"fed", "bind", &c.fed.bind},
      {"fed", "clients", &c.fed.clients},
      {"fed", "coordinator", &c.fed.coordinator},
      {"fed", "coordinator_key", &c.fed.coordinator_key},
      {"fed", "coordinator_public", &c.fed.coordinator_public},
      {"fed", "client_key", &c.fed.client_key},
      {"fed", "client_public", &c.fed.client_public},
      {"fed", "aggregator", &c.fed.aggregator},
      {"fed", "trim_fraction", &c.fed.trim_fraction},
      {"fed", "byzantine", &c.fed.byzantine},
      {"fed", "krum_select", &c.fed.krum_select},
      {"fed", "norm_bound", &c.fed.norm_bound},
      {"fed", "dp_clip", &c.fed.dp_clip},
      {"fed", "dp_noise", &c.fed.dp_noise},
      {"fed", "dp_delta", &c.fed.dp_delta},
      {"fed", "secure_aggregation", &c.fed.secure_aggregation},
      {"fed", "secagg_clip", &c.fed.secagg_clip},
      {"fed", "secagg_threshold", &c.fed.secagg_threshold},
      {"fed", "secagg_step_s", &c.fed.secagg_step_s},
      {"fed", "attack", &c.fed.attack},
      {"fed", "attackers", &c.fed.attackers},
      {"fed", "attack_scale", &c.fed.attack_scale},
      {"fed", "attack_noise", &c.fed.attack_noise},
      {"comm", "backend", &c.comm.backend},
      {"comm", "timeout_s", &c.comm.timeout_s},
      {"comm", "store", &c.comm.store},
      {"comm", "host", &c.comm.host},
      {"comm", "transport", &c.comm.transport},
      {"comm", "key", &c.comm.key},
      {"comm", "peer_public", &c.comm.peer_public},
      {"monitor", "peak_flops", &c.monitor.peak_flops},
      {"monitor", "core_watts", &c.monitor.core_watts},
      {"monitor", "grid_gco2_per_kwh", &c.monitor.grid_gco2_per_kwh},
      {"monitor", "trace_steps", &c.monitor.trace_steps},
  };
}

// A config is a few KiB; anything much larger is the wrong file (or /dev/zero). The same bound
// as the TOML pre-scan's (toml_limits.h says why it is not larger).
constexpr int64_t kMaxConfigBytes = TomlLimits{}.max_bytes;
// Error messages quote at most this much of a value or of a line of toml11's report.
constexpr size_t kMaxQuoted = 160;

std::string cut(std::string s, size_t max_chars = kMaxQuoted) {
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

// A value as toml11 prints it, on one line ("[1, 2, 3]", not one element per line).
std::string one_line(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n') {
      out += s[i];
      continue;
    }
    while (i + 1 < s.size() && s[i + 1] == ' ') ++i;  // the indentation of the next line
    if (!out.empty() && out.back() != '[' && out.back() != '{' && out.back() != ' ') out += ' ';
  }
  return out;
}

std::string render(const toml::value& v) {
  std::ostringstream os;
  os << v;
  std::string s = os.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// toml11's report quotes the offending line, which may be a megabyte long: keep each line of it
// short and only the first few lines.
std::string bounded_report(const std::string& what) {
  std::string out;
  size_t pos = 0;
  for (int lines = 0; pos < what.size() && lines < 12; ++lines) {
    size_t end = what.find('\n', pos);
    if (end == std::string::npos) end = what.size();
    out += (lines ? "\n" : "") + cut(what.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// The text of a config file: a regular file of at most kMaxConfigBytes. A directory, a device
// such as /dev/zero or a FIFO is refused before it is read.
std::string read_config_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw IoError(  // exit 3, as a missing data file
        fmt::format("config file not found or unreadable: {} ({})", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw ConfigError(fmt::format("{}: not a config file ({}); give the path of a .toml file", path,
                                  S_ISDIR(st.st_mode) ? "a directory" : "not a regular file"));
  }
  if (st.st_size > kMaxConfigBytes) {
    throw ConfigError(fmt::format("{}: {} bytes, more than the {} bytes a config file may have",
                                  path, st.st_size, kMaxConfigBytes));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw IoError(  // exit 3, as a missing data file
        fmt::format("config file not found or unreadable: {} ({})", path, std::strerror(errno)));
  }
  // Read one byte past the limit, so a file that grew after stat() is still caught.
  std::string text(static_cast<size_t>(kMaxConfigBytes) + 1, '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t r = ::read(fd, text.data() + done, text.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      throw ConfigError(fmt::format("cannot read config file {}: {}", path, std::strerror(err)));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  if (done > static_cast<size_t>(kMaxConfigBytes)) {
    throw ConfigError(
        fmt::format("{}: more than the {} bytes a config file may have", path, kMaxConfigBytes));
  }
  text.resize(done);
  return text;
}

[[noreturn]] void type_error(const Field& f, const toml::value& v, const std::string& origin,
                             const char* expected) {
  throw ConfigError(fmt::format("{}.{} = {} in {}: expected {}", f.section, f.key,
                                cut(one_line(render(v))), origin, expected));
}

std::string toml_basic_string(const std::string& s);

// A named choice (model.kind, sync.method): its enumerator, or a ConfigError listing the names
// (and the nearest one, for a typo).
template <NamedEnum E>
E parse_choice(const Field& f, const std::string& text, const std::string& origin) {
  if (const std::optional<E> e = parse_enum<E>(text)) return *e;
  const std::vector<std::string> names(EnumNames<E>::kNames.begin(), EnumNames<E>::kNames.end());
  const std::string near = nearest_name(text, names);
  throw ConfigError(fmt::format("{}.{} = {} in {}: allowed values are {}{}", f.section, f.key,
                                toml_basic_string(cut(text, 40)), origin, enum_choices<E>(),
                                near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
}

// bare_text: for a key a --set gave, the text after "=" as typed; a string key takes it as it is
// where TOML read another scalar from it (--set run.name=2024, --set fed.attack=nan).
void assign(const Field& f, const toml::value& v, const std::string& origin,
            const std::string* bare_text) {
  std::visit(
      [&](auto* target) {
        using T = std::remove_pointer_t<decltype(target)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          if (!v.is_integer()) type_error(f, v, origin, "an integer");
          *target = v.as_integer();
        } else if constexpr (std::is_same_v<T, double>) {
          if (v.is_integer()) {
            *target = static_cast<double>(v.as_integer());
          } else if (v.is_floating()) {
            *target = v.as_floating();
          } else {
            type_error(f, v, origin, "a number");
          }
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (v.is_string()) {
            *target = v.as_string().str;
          } else if (bare_text != nullptr && !v.is_array() && !v.is_table()) {
            *target = *bare_text;
          } else {
            type_error(f, v, origin, "a string");
          }
        } else if constexpr (NamedEnum<T>) {
          if (v.is_string()) {
            *target = parse_choice<T>(f, v.as_string().str, origin);
          } else if (bare_text != nullptr && !v.is_array() && !v.is_table()) {
            *target = parse_choice<T>(f, *bare_text, origin);
          } else {
            type_error(f, v, origin, fmt::format("one of {}", enum_choices<T>()).c_str());
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!v.is_boolean()) type_error(f, v, origin, "true or false");
          *target = v.as_boolean();
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          if (!v.is_array()) type_error(f, v, origin, "an array of integers");
          target->clear();
          for (const auto& e : v.as_array()) {
            if (!e.is_integer()) type_error(f, v, origin, "an array of integers");
            target->push_back(e.as_integer());
          }
        } else {
          target->clear();
          if (v.is_string()) {  // one pattern: --set train.freeze=wte
            target->push_back(v.as_string().str);
            return;
          }
          if (!v.is_array()) type_error(f, v, origin, "an array of strings");
          for (const auto& e : v.as_array()) {
            if (!e.is_string()) type_error(f, v, origin, "an array of strings");
            target->push_back(e.as_string().str);
          }
        }
      },
      f.target);
}

// What one --set put into the config.
struct Override {
  std::string key;         // "a.b"
  std::string text;        // c as typed
  std::string assignment;  // the whole --set, for messages
};

std::string trimmed(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") + 1 - begin);
}

// "a.b=c" -> root[a][b] = c, c in TOML syntax or else a bare string; blanks around a, b and c
// (--set "train.steps = 5") are dropped.
Override apply_override(toml::value& root, const std::string& assignment) {
  auto eq = assignment.find('=');
  auto dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) {
    throw ConfigError(fmt::format(
        "--set {}: expected section.key=value (for example --set train.lr=3e-4)", cut(assignment)));
  }
  std::string section = trimmed(assignment.substr(0, dot));
  std::string key = trimmed(assignment.substr(dot + 1, eq - dot - 1));
  std::string text = trimmed(assignment.substr(eq + 1));
  // Bounded like a config file, and outside the try: an override too deep to parse safely is
  // an error, not a string.
  check_toml_limits("v = " + text, "--set " + cut(assignment));
  toml::value value;
  try {
    std::istringstream is("v = " + text);
    value = toml::parse(is, "--set").at("v");
  } catch (const std::exception&) {
    value = toml::value(text);
  }
  if (!root.is_table()) root = toml::table{};
  auto& table = root.as_table();
  if (!table.count(section)) table[section] = toml::table{};
  if (!table[section].is_table()) {
    throw ConfigError(
        fmt::format("--set {}: [{}] is not a section", cut(assignment), cut(section)));
  }
  table[section].as_table()[key] = value;
  return {section + "." + key, text, assignment};
}

std::vector<std::string> section_names(const std::vector<Field>& schema) {
  std::vector<std::string> out;
  for (const auto& f : schema) {
    if (out.empty() || out.back() != f.section) out.push_back(f.section);
  }
  return out;
}

std::vector<std::string> full_names(const std::vector<Field>& schema) {
  std::vector<std::string> out;
  for (const auto& f : schema) out.push_back(std::string(f.section) + "." + f.key);
  return out;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// "; did you mean train.steps?" for a name a few edits from a known one, else "".
std::string did_you_mean(const std::string& typed, const std::vector<std::string>& names) {
  // Known names are short; a long one (fuzzed, pasted) is no typo, and its edit distance to
  // every name would cost length x names.
  if (typed.size() > 64) return "";
  const std::string near = nearest_name(typed, names, std::max<size_t>(2, typed.size() / 4));
  return near.empty() ? "" : "; did you mean " + near + "?";
}

std::string known_keys(Config& c, const std::string& section) {
  std::string out;
  for (const auto& f : fields(c)) {
    if (section != f.section) continue;
    if (!out.empty()) out += ", ";
    out += f.key;
  }
  return out;
}

// s as a one-line TOML basic string ("a\"b"): toml11 would print a string holding a quote as a
// multi-line one, and the resolved config is read back line by line (config_diff.h).
std::string toml_basic_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04X}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string toml_scalar(const FieldTarget& target) {
  return std::visit(
      [](auto* v) -> std::string {
        using T = std::remove_pointer_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(*v);
        } else if constexpr (std::is_same_v<T, double>) {
          std::string s = fmt::format("{}", *v);  // shortest round-trip form
          if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
          return s;
        } else if constexpr (std::is_same_v<T, std::string>) {
          return render(toml::value(*v));
        } else if constexpr (NamedEnum<T>) {
          return toml_basic_string(std::string(name_of(*v)));
        } else if constexpr (std::is_same_v<T, bool>) {
          return *v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          std::string s = "[";
          for (size_t i = 0; i < v->size(); ++i) s += (i ? ", " : "") + std::to_string((*v)[i]);
          return s + "]";
        } else {
          std::string s = "[";
          for (size_t i = 0; i < v->size(); ++i) s += (i ? ", " : "") + toml_basic_string((*v)[i]);
          return s + "]";
        }
      },
      target);
}

}  // namespace

Config parse_config(const std::string& toml_text, const std::string& origin,
                    const std::vector<std::string>& overrides) {
  check_toml_limits(toml_text, origin);
  toml::value root;
  try {
    std::istringstream is(toml_text);
    root = toml::parse(is, origin);
  } catch (const std::exception& e) {
    // toml::syntax_error mostly; whatever else toml11 throws on bad text is a bad config too.
    throw ConfigError(fmt::format("{}: TOML syntax error: {}", origin, bounded_report(e.what())));
  }
  // Which keys an override set (the last one wins, as in TOML order): errors in them name the
  // override, not the file.
  std::map<std::string, Override> override_of;
  for (const auto& o : overrides) {
    Override applied = apply_override(root, o);
    override_of[applied.key] = applied;
  }

  Config config;
  auto schema = fields(config);
  auto where = [&](const std::string& section, const std::string& key) {
    const auto it = override_of.find(section + "." + key);
    return it == override_of.end() ? origin : "--set " + cut(it->second.assignment);
  };
  for (const auto& [section, table] : root.as_table()) {
    if (!table.is_table()) {
      throw ConfigError(
          fmt::format("{}: '{}' must be a section [{}]", origin, cut(section), cut(section)));
    }
    bool known_section = false;
    for (const auto& f : schema) known_section |= (section == f.section);
    if (!known_section) {
      const std::string first_key = table.as_table().empty() ? "" : table.as_table().begin()->first;
      throw ConfigError(fmt::format(
          "{}: unknown section [{}]{} (allowed: {})", where(section, first_key), cut(section),
          did_you_mean(section, section_names(schema)), join(section_names(schema))));
    }
    for (const auto& [key, value] : table.as_table()) {
      const Field* field = nullptr;
      for (const auto& f : schema)
        if (section == f.section && key == f.key) field = &f;
      if (!field) {
        throw ConfigError(fmt::format("{}: unknown key {}.{}{} (allowed in [{}]: {})",
                                      where(section, key), section, cut(key),
                                      did_you_mean(section + "." + key, full_names(schema)),
                                      section, known_keys(config, section)));
      }
      const auto set = override_of.find(section + "." + key);
      assign(*field, value, where(section, key),
             set == override_of.end() ? nullptr : &set->second.text);
    }
  }
  // A default that depends on another key: applied only where no file or --set gave the key,
  // so the resolved config (to_toml) records the widths the run used.
  const auto& tables = root.as_table();
  const auto model = tables.find("model");
  const bool hidden_given = model != tables.end() && model->second.as_table().count("hidden") > 0;
  if (config.model.kind == ModelKind::kCnn && !hidden_given)
    config.model.hidden = ModelConfig::kCnnHidden;
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_config(read_config_file(path), path, overrides);
}

std::string Config::to_toml() const {
  Config copy = *this;
  std::string out;
  std::string section;
  for (const auto& f : fields(copy)) {
    if (section != f.section) {
      section = f.section;
      out += (out.empty() ? "[" : "\n[") + section + "]\n";
    }
    out += fmt::format("{} = {}\n", f.key, toml_scalar(f.target));
  }
  return out;
}

}  // namespace brigade
