// brigade: distributed training of neural networks. Subcommands in cli/*_command.cc.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/base/nearest_name.h"
#include "brigade/cli/commands.h"
#include "brigade/cli/version.h"

int main(int argc, char** argv) {
  CLI::App app{"brigade: distributed training of neural networks"};
  app.require_subcommand(1);
  // Every option's help shows its default (subcommands inherit this from the app).
  app.option_defaults()->always_capture_default();
  std::map<std::string, brigade::cli::Command> commands = {
      {"train", brigade::cli::add_train(app)},
      {"check-config", brigade::cli::add_check_config(app)},
      {"eval", brigade::cli::add_eval(app)},
      {"generate", brigade::cli::add_generate(app)},
      {"serve", brigade::cli::add_serve(app)},
      {"tokenize", brigade::cli::add_tokenize(app)},
      {"launch", brigade::cli::add_launch(app)},
      {"export", brigade::cli::add_export(app)},
      {"import", brigade::cli::add_import(app)},
      {"report", brigade::cli::add_report(app)},
      {"partition", brigade::cli::add_partition(app)},
      {"privacy", brigade::cli::add_privacy(app)},
      {"keygen", brigade::cli::add_keygen(app)},
      {"fed-server", brigade::cli::add_fed_server(app)},
      {"fed-client", brigade::cli::add_fed_client(app)},
      {"plan", brigade::cli::add_plan(app)},
  };
  app.set_version_flag(
      "--version", [] { return brigade::cli::version_text(); },
      "the version, commit, build type and libraries");
  // A mistyped subcommand ("trian") would only be told that a subcommand is required.
  if (argc > 1 && argv[1][0] != '-' && commands.count(argv[1]) == 0) {
    std::vector<std::string> names;
    std::string list;
    for (const auto& [name, command] : commands) {
      names.push_back(name);
      list += (list.empty() ? "" : ", ") + name;
    }
    const std::string hint = brigade::nearest_name(argv[1], names);
    std::fprintf(stderr, "brigade: unknown subcommand '%s'%s (subcommands: %s)\n", argv[1],
                 hint.empty() ? "" : ("; did you mean '" + hint + "'?").c_str(), list.c_str());
    return brigade::kExitConfig;
  }
  // The command line, with `--` before a launch's worker command where it was left out.
  std::vector<std::string> args = brigade::cli::separate_worker_command(
      app, std::vector<std::string>(argv + std::min(argc, 1), argv + argc));
  std::vector<char*> parsed_argv = {argv[0]};
  for (std::string& a : args) parsed_argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(parsed_argv.size()), parsed_argv.data());
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : brigade::kExitConfig;
  }
  try {
    for (auto* sub : app.get_subcommands()) return commands.at(sub->get_name())();
  } catch (const brigade::Error& e) {
    std::fprintf(stderr, "brigade: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade: internal error: %s\n", e.what());
    return brigade::kExitFailure;
  }
  return brigade::kExitFailure;
}
