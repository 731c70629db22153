#include "brigade/monitor/report/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace brigade {

namespace {

constexpr int kWidth = 720, kHeight = 300;
constexpr int kLeft = 70, kRight = 20, kTop = 30, kBottom = 45;
constexpr int kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  // A range that is never empty, padded a little when all values are equal.
  void settle(bool from_zero) {
    if (!std::isfinite(lo)) lo = hi = 0;
    if (from_zero) lo = std::min(lo, 0.0);
    if (hi <= lo) hi = lo + (lo == 0 ? 1 : std::abs(lo) * 0.1);
  }
  double at(double v, double pixels) const { return (v - lo) / (hi - lo) * pixels; }
};

// Numbers on axes: short, scientific only when needed.
std::string tick_text(double v) {
  const double a = std::abs(v);
  if (a != 0 && (a >= 1e5 || a < 1e-3)) return fmt::format("{:.2g}", v);
  return fmt::format("{:.4g}", v);
}

std::string frame(const std::string& id, const std::string& title, const std::string& x_label,
                  const std::string& y_label, const Range& x, const Range& y, bool x_ticks) {
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" viewBox=\"0 0 {} {}\" data-x-lo=\"{}\" data-x-hi=\"{}\" data-y-lo=\"{}\" "
      "data-y-hi=\"{}\" data-plot=\"{} {} {} {}\">\n",
      html_escape(id), kWidth, kHeight, kWidth, kHeight, x.lo, x.hi, y.lo, y.hi, kLeft, kTop,
      kPlotW, kPlotH);
  s +=
      fmt::format("<text x=\"{}\" y=\"18\" class=\"title\">{}</text>\n", kLeft, html_escape(title));
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", kLeft,
      kTop, kPlotW, kPlotH);
  for (int i = 0; i <= 4; ++i) {
    const double v = y.lo + (y.hi - y.lo) * i / 4;
    const double py = kTop + kPlotH - kPlotH * i / 4.0;
    s += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>\n",
        kLeft, kLeft + kPlotW, py, py, kLeft - 6, py + 4, tick_text(v));
    if (!x_ticks) continue;
    const double xv = x.lo + (x.hi - x.lo) * i / 4;
    const double px = kLeft + kPlotW * i / 4.0;
    s +=
        fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n",
                    px, kTop + kPlotH + 16, tick_text(xv));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"axis\" text-anchor=\"middle\">{}</text>\n",
                   kLeft + kPlotW / 2, kHeight - 8, html_escape(x_label));
  s += fmt::format(
      "<text x=\"14\" y=\"{}\" class=\"axis\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 14 {})\">{}</text>\n",
      kTop + kPlotH / 2, kTop + kPlotH / 2, html_escape(y_label));
  return s;
}

std::string legend(const std::vector<std::string>& labels) {
  std::string s;
  double x = kLeft + 8;
  for (size_t i = 0; i < labels.size(); ++i) {
    s += fmt::format(
        "<rect x=\"{:.0f}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{:.0f}\" y=\"{}\" class=\"legend\">{}</text>\n",
        x, kTop + 6, series_color(i), x + 14, kTop + 15, html_escape(labels[i]));
    x += 24 + 7.0 * static_cast<double>(labels[i].size());
  }
  return s;
}

}  // namespace

const char* series_color(size_t i) {
  static const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                   "#E69F00", "#56B4E9", "#F0E442", "#000000"};
  return kPalette[i % std::size(kPalette)];
}

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_svg(const LineChart& c) {
  Range x, y;
  for (const ChartSeries& s : c.series) {
    for (const auto& [px, py] : s.points) {
      x.add(px);
      y.add(py);
    }
  }
  x.settle(false);
  y.settle(false);
  std::string svg = frame(c.id, c.title, c.x_label, c.y_label, x, y, true);
  for (double m : c.markers) {
    const double px = kLeft + x.at(m, kPlotW);
    svg += fmt::format(
        "<line class=\"marker\" data-x=\"{}\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{}\" "
        "stroke=\"#888\" stroke-dasharray=\"4 3\"><title>{} {}</title></line>\n",
        m, px, px, kTop, kTop + kPlotH, html_escape(c.marker_label), tick_text(m));
  }
  std::vector<std::string> labels;
  for (size_t i = 0; i < c.series.size(); ++i) {
    const ChartSeries& s = c.series[i];
    labels.push_back(s.label);
    std::string points, values;
    for (const auto& [px, py] : s.points) {
      if (!std::isfinite(px) || !std::isfinite(py)) continue;
      points +=
          fmt::format("{:.2f},{:.2f} ", kLeft + x.at(px, kPlotW), kTop + kPlotH - y.at(py, kPlotH));
      values += fmt::format("{} {} ", px, py);
    }
    svg += fmt::format(
        "<polyline class=\"series\" data-label=\"{}\" data-values=\"{}\" points=\"{}\" "
        "fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
        html_escape(s.label), values, points, series_color(i));
  }
  return svg + legend(labels) + "</svg>\n";
}

std::string render_svg(const StackedBars& c) {
  Range x, y;
  for (double v : c.xs) x.add(v);
  for (size_t k = 0; k < c.xs.size(); ++k) {
    double total = 0;
    for (const auto& part : c.parts) total += part[k];
    y.add(total);
  }
  // Bars centred on their x, one x-step apart (steps are equally spaced), 80% of a slot wide.
  const size_t n = c.xs.size();
  if (n == 0) x.lo = x.hi = 0;
  const double dx = n > 1 ? (x.hi - x.lo) / static_cast<double>(n - 1) : 1.0;
  x.lo -= dx / 2;
  x.hi += dx / 2;
  y.settle(true);
  const double width = std::max(1.0, 0.8 * kPlotW / std::max<double>(1, static_cast<double>(n)));
  std::string svg = frame(c.id, c.title, c.x_label, c.y_label, x, y, true);
  for (size_t i = 0; i < c.parts.size(); ++i) {
    svg += fmt::format("<g class=\"part\" data-label=\"{}\" fill=\"{}\">",
                       html_escape(c.part_labels[i]), series_color(i));
    for (size_t k = 0; k < c.xs.size(); ++k) {
      double below = 0;
      for (size_t j = 0; j < i; ++j) below += c.parts[j][k];
      const double h = y.at(below + c.parts[i][k], kPlotH) - y.at(below, kPlotH);
      svg += fmt::format(
          "<rect data-x=\"{}\" data-value=\"{}\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" "
          "height=\"{:.2f}\"/>",
          c.xs[k], c.parts[i][k], kLeft + x.at(c.xs[k], kPlotW) - width / 2,
          kTop + kPlotH - y.at(below + c.parts[i][k], kPlotH), width, std::max(0.0, h));
    }
    svg += "</g>\n";
  }
  return svg + legend(c.part_labels) + "</svg>\n";
}

std::string render_svg(const BarChart& c) {
  Range x, y;
  x.lo = 0;
  x.hi = static_cast<double>(c.values.size());
  for (double v : c.values) y.add(v);
  y.settle(true);
  std::string svg = frame(c.id, c.title, c.x_label, c.y_label, x, y, false);
  const double slot = kPlotW / std::max<double>(1, c.values.size());
  for (size_t i = 0; i < c.values.size(); ++i) {
    const double h = y.at(c.values[i], kPlotH) - y.at(0, kPlotH);
    const bool marked = i < c.marked.size() && c.marked[i];
    svg += fmt::format(
        "<rect class=\"bar\" data-label=\"{}\" data-value=\"{}\" x=\"{:.2f}\" y=\"{:.2f}\" "
        "width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>{}: {}</title></rect>"
        "<text x=\"{:.2f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n",
        html_escape(c.labels[i]), c.values[i], kLeft + slot * (i + 0.1),
        kTop + kPlotH - y.at(c.values[i], kPlotH), slot * 0.8, std::max(0.0, h),
        marked ? "#D55E00" : "#0072B2", html_escape(c.labels[i]), tick_text(c.values[i]),
        kLeft + slot * (i + 0.5), kTop + kPlotH + 16, html_escape(c.labels[i]));
  }
  return svg + "</svg>\n";
}

}  // namespace brigade
