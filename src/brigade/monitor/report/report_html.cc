#include "brigade/monitor/report/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "brigade/base/json_limits.h"
#include "brigade/monitor/report/svg_chart.h"

namespace brigade {

namespace {

constexpr const char* kBreakdownParts[] = {"time_data_ms", "time_compute_ms", "time_comm_ms",
                                           "time_wait_ms", "time_bubble_ms",  "time_checkpoint_ms",
                                           "time_eval_ms", "time_other_ms"};

double number(const nlohmann::json& r, const char* key) {
  const auto it = r.find(key);
  return it != r.end() && it->is_number() ? it->get<double>() : NAN;
}

// One series per run of `key` over `x_key` ("step", or "wall" for seconds since the start).
std::vector<ChartSeries> series_of(const std::vector<RunRecords>& runs, const char* key,
                                   const char* x_key, bool eval = false, const char* suffix = "") {
  std::vector<ChartSeries> out;
  for (const RunRecords& run : runs) {
    ChartSeries s{run.name + suffix, {}};
    for (const auto& r : eval ? run.eval : run.train) {
      const double x =
          std::string(x_key) == "wall" ? record_time_s(r) - run.first_time_s : number(r, "step");
      const double y = number(r, key);
      if (std::isfinite(x) && std::isfinite(y)) s.points.emplace_back(x, y);
    }
    if (!s.points.empty()) out.push_back(std::move(s));
  }
  return out;
}

// A federation's rounds: one series per run of `key` against the round, or (by_bytes) against
// the bytes moved so far (each round's bytes_down + bytes_up, summed).
std::vector<ChartSeries> round_series(const std::vector<RunRecords>& runs, const char* key,
                                      bool by_bytes) {
  std::vector<ChartSeries> out;
  for (const RunRecords& run : runs) {
    ChartSeries s{run.name, {}};
    double moved = 0;
    for (const auto& r : run.rounds) {
      const double bytes = number(r, "bytes_down") + number(r, "bytes_up");
      if (std::isfinite(bytes)) moved += bytes;
      const double x = by_bytes ? moved : number(r, "round");
      const double y = number(r, key);
      if (std::isfinite(x) && std::isfinite(y)) s.points.emplace_back(x, y);
    }
    if (!s.points.empty()) out.push_back(std::move(s));
  }
  return out;
}

std::vector<double> resume_markers(const std::vector<RunRecords>& runs) {
  std::set<double> steps;
  for (const RunRecords& run : runs) {
    for (int64_t s : run.resume_steps) steps.insert(static_cast<double>(s));
  }
  return {steps.begin(), steps.end()};
}

std::string section(const std::string& title, const std::string& body) {
  return fmt::format("<section><h2>{}</h2>\n{}</section>\n", html_escape(title), body);
}

std::string key_value_table(const nlohmann::json& j) {
  if (!j.is_object()) return "<p>(none)</p>";
  std::string s = "<table>";
  for (const auto& [key, v] : j.items()) {
    const std::string text = v.is_string() ? v.get<std::string>() : json_excerpt(v, 400);
    s += fmt::format("<tr><th>{}</th><td><pre>{}</pre></td></tr>", html_escape(key),
                     html_escape(text));
  }
  return s + "</table>\n";
}

std::string line_chart(const std::string& id, const std::string& title, const char* y_label,
                       std::vector<ChartSeries> series, const char* x_label,
                       const std::vector<double>& markers) {
  if (series.empty()) return "";
  return render_svg(LineChart{.id = id,
                              .title = title,
                              .x_label = x_label,
                              .y_label = y_label,
                              .series = std::move(series),
                              .markers = markers,
                              .marker_label = "resumed at step"});
}

std::string breakdown_chart(const RunRecords& run, size_t index) {
  StackedBars c{.id = fmt::format("breakdown-{}", index),
                .title = "step time by part: " + run.name,
                .x_label = "step",
                .y_label = "ms",
                .xs = {},
                .part_labels = {},
                .parts = {}};
  for (const char* p : kBreakdownParts) {
    c.part_labels.push_back(std::string(p).substr(5, std::string(p).size() - 8));  // "comm"
    c.parts.emplace_back();
  }
  for (const auto& r : run.train) {
    if (!std::isfinite(number(r, "time_compute_ms"))) continue;  // written before the breakdown
    c.xs.push_back(number(r, "step"));
    for (size_t i = 0; i < std::size(kBreakdownParts); ++i) {
      const double v = number(r, kBreakdownParts[i]);
      c.parts[i].push_back(std::isfinite(v) ? v : 0.0);
    }
  }
  return c.xs.empty() ? "" : render_svg(c);
}

// Bytes this rank sent per step, stacked by mesh axis and operation (comm_sent_by).
std::string comm_chart(const RunRecords& run, size_t index) {
  StackedBars c{.id = fmt::format("comm-{}", index),
                .title = "bytes sent per step by mesh axis and operation: " + run.name,
                .x_label = "step",
                .y_label = "bytes",
                .xs = {},
                .part_labels = {},
                .parts = {}};
  for (const auto& r : run.train) {
    const auto by = r.find("comm_sent_by");
    if (by == r.end() || !by->is_object()) continue;
    for (const auto& [key, v] : by->items()) {
      if (v.is_number() &&
          std::find(c.part_labels.begin(), c.part_labels.end(), key) == c.part_labels.end()) {
        c.part_labels.push_back(key);
      }
    }
  }
  if (c.part_labels.empty()) return "";
  c.parts.resize(c.part_labels.size());
  for (const auto& r : run.train) {
    const auto by = r.find("comm_sent_by");
    if (by == r.end() || !by->is_object()) continue;
    c.xs.push_back(number(r, "step"));
    for (size_t i = 0; i < c.part_labels.size(); ++i) {
      const auto v = by->find(c.part_labels[i]);
      c.parts[i].push_back(v != by->end() && v->is_number() ? v->get<double>() : 0.0);
    }
  }
  return render_svg(c);
}

std::string busy_chart(const RunRecords& run, size_t index) {
  const auto it =
      run.summary.is_object() ? run.summary.find("busy_ms_per_rank") : run.summary.end();
  if (!run.summary.is_object() || it == run.summary.end() || !it->is_array()) return "";
  std::set<int64_t> flagged;
  for (const auto& r : run.train) {
    if (r.contains("straggler_rank") && r["straggler_rank"].is_number_integer()) {
      flagged.insert(r["straggler_rank"].get<int64_t>());
    }
  }
  BarChart c{.id = fmt::format("busy-{}", index),
             .title = "mean busy time per step, by rank: " + run.name +
                      (flagged.empty() ? "" : " (stragglers marked)"),
             .x_label = "rank",
             .y_label = "ms",
             .labels = {},
             .values = {},
             .marked = {}};
  for (size_t r = 0; r < it->size(); ++r) {
    if (!(*it)[r].is_number()) continue;
    c.labels.push_back(std::to_string(r));
    c.values.push_back((*it)[r].get<double>());
    c.marked.push_back(flagged.count(static_cast<int64_t>(r)) != 0);
  }
  return render_svg(c);
}

// Fills #render-check with what the browser laid out: per chart its box and per series the
// number of points, so a headless test sees the page as drawn.
constexpr const char* kRenderCheck = R"(<script>
window.addEventListener('load', function () {
  var out = [];
  document.querySelectorAll('svg.chart').forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    var chart = {id: svg.id, width: box.width, height: box.height, series: []};
    svg.querySelectorAll('polyline.series').forEach(function (p) {
      chart.series.push({label: p.dataset.label, points: p.points.numberOfItems,
                         values: p.dataset.values.trim()});
    });
    chart.rects = svg.querySelectorAll('rect[data-value]').length;
    out.push(chart);
  });
  document.getElementById('render-check').textContent = JSON.stringify(out);
});
</script>)";

}  // namespace

std::string build_report_html(const std::vector<RunRecords>& runs) {
  std::string names;
  for (const RunRecords& r : runs) names += (names.empty() ? "" : ", ") + r.name;
  const std::vector<double> markers = resume_markers(runs);
  std::string body;

  std::vector<ChartSeries> loss = series_of(runs, "loss", "step", false, " train");
  for (ChartSeries& s : series_of(runs, "val_loss", "step", true, " validation")) {
    loss.push_back(std::move(s));
  }
  std::string curves =
      line_chart("loss-step", "loss against step", "loss", std::move(loss), "step", markers);
  curves += line_chart("loss-time", "training loss against wall time", "loss",
                       series_of(runs, "loss", "wall"), "seconds since the run started", {});
  curves += line_chart("tokens", "tokens/s", "tokens/s", series_of(runs, "tokens_per_s", "step"),
                       "step", markers);
  curves += line_chart("mfu", "model FLOPs utilisation", "MFU", series_of(runs, "mfu", "step"),
                       "step", markers);
  curves += line_chart("lr", "learning rate", "lr", series_of(runs, "lr", "step"), "step", {});
  std::vector<ChartSeries> comm = series_of(runs, "comm_sent_bytes", "step", false, " sent");
  for (ChartSeries& s : series_of(runs, "comm_recv_bytes", "step", false, " received")) {
    comm.push_back(std::move(s));
  }
  curves += line_chart("comm", "communication bytes per step (rank 0, every communicator)", "bytes",
                       std::move(comm), "step", markers);
  body += section("Curves", curves);
  // A federation's coordinator records rounds, not steps.
  std::string rounds;
  for (const auto& [key, name] :
       {std::pair{"test_loss", "test loss"}, std::pair{"test_accuracy", "test accuracy"},
        std::pair{"train_loss", "clients' training loss"}}) {
    rounds += line_chart(std::string("round-") + key, std::string(name) + " against round", name,
                         round_series(runs, key, false), "round", {});
    rounds += line_chart(std::string("bytes-") + key, std::string(name) + " against bytes moved",
                         name, round_series(runs, key, true), "bytes moved (down + up)", {});
  }
  if (!rounds.empty()) body += section("Federated rounds", rounds);

  for (size_t i = 0; i < runs.size(); ++i) {
    const RunRecords& run = runs[i];
    std::string per_run = breakdown_chart(run, i) + comm_chart(run, i) + busy_chart(run, i);
    per_run += "<h3>summary</h3>" + key_value_table(run.summary);
    per_run += "<h3>config</h3><pre>" + html_escape(run.config_toml) + "</pre>";
    per_run += "<h3>provenance</h3>" + key_value_table(run.manifest);
    body += section("Run " + run.name + " (" + run.folder + ")", per_run);
  }

  return fmt::format(R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>brigade report: {0}</title>
<style>
body {{ font: 14px sans-serif; margin: 24px; color: #222; }}
svg.chart {{ display: block; margin: 12px 0; background: #fff; }}
svg .title {{ font: bold 13px sans-serif; }} svg .tick {{ font: 10px sans-serif; fill: #555; }}
svg .axis {{ font: 11px sans-serif; }} svg .legend {{ font: 11px sans-serif; }}
table {{ border-collapse: collapse; }} th, td {{ border: 1px solid #ddd; padding: 2px 6px;
  text-align: left; vertical-align: top; }} pre {{ margin: 0; white-space: pre-wrap; }}
#render-check {{ display: none; }}
</style></head><body>
<h1>brigade report: {0}</h1>
{1}<pre id="render-check"></pre>
{2}
</body></html>
)",
                     html_escape(names), body, kRenderCheck);
}

}  // namespace brigade
