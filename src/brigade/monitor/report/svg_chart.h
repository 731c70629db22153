#pragma once
// Charts of a run report (`brigade report`) as inline SVG: no script, no library, so the page
// opens offline in any browser. Line charts overlay several series (one per run), with
// optional vertical markers (resumes); a stacked bar chart shows a breakdown per step; a bar
// chart one value per rank. Every drawn series carries its data in data-* attributes (the
// points in chart coordinates and the values they stand for), so a test reads back what the
// browser drew.
#include <string>
#include <utility>
#include <vector>

namespace brigade {

struct ChartSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), x increasing
};

struct LineChart {
  std::string id;  // the element id, e.g. "loss-step"
  std::string title, x_label, y_label;
  std::vector<ChartSeries> series;
  std::vector<double> markers;  // x positions of vertical lines (resumes)
  std::string marker_label;
};

// One stack per x: parts[i][k] is part i's height at xs[k].
struct StackedBars {
  std::string id, title, x_label, y_label;
  std::vector<double> xs;
  std::vector<std::string> part_labels;
  std::vector<std::vector<double>> parts;
};

struct BarChart {
  std::string id, title, x_label, y_label;
  std::vector<std::string> labels;
  std::vector<double> values;
  std::vector<bool> marked;  // drawn in the warning colour (a flagged straggler)
};

std::string render_svg(const LineChart& chart);
std::string render_svg(const StackedBars& chart);
std::string render_svg(const BarChart& chart);

// The colour of series i (a fixed, colour-blind-safe palette, Okabe-Ito).
const char* series_color(size_t i);

// Escapes text for HTML and SVG.
std::string html_escape(const std::string& text);

}  // namespace brigade
