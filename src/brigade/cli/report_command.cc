// brigade report: one self-contained HTML page of one run or several overlaid
// (monitor/report/report_html.h).
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/cli/commands.h"
#include "brigade/monitor/report/report_html.h"

namespace brigade::cli {

namespace {

struct ReportArgs {
  std::vector<std::string> runs;
  std::string out;
};

int run_report(const ReportArgs& args) {
  std::vector<RunRecords> runs;
  for (const std::string& r : args.runs) runs.push_back(read_run_records(r));
  std::string out = args.out;
  if (out.empty()) out = (runs.size() == 1 ? runs[0].folder : std::string(".")) + "/report.html";
  write_file_atomic(out, build_report_html(runs));
  size_t records = 0;
  for (const RunRecords& r : runs) records += r.train.size() + r.eval.size();
  std::printf("wrote %s: %zu run(s), %zu records; open it in a browser (it needs no network)\n",
              out.c_str(), runs.size(), records);
  return 0;
}

}  // namespace

Command add_report(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  auto* sub = app.add_subcommand(
      "report", "write an HTML report of runs: loss, throughput, MFU, communication, step time");
  sub->add_option("runs", args->runs, "run folders (runs/<name>); several are overlaid")
      ->default_str("")
      ->required();
  sub->add_option("--out", args->out, "the HTML file (default: <run>/report.html)");
  return [args]() { return run_report(*args); };
}

}  // namespace brigade::cli
