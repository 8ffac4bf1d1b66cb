#include "loadtest/report/plot_svg.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loadtest/core/text_file.h"

namespace sluice::loadtest {
namespace {

constexpr double kWidth = 900, kPanelHeight = 300, kLeft = 70, kRight = 30, kTop = 40, kBottom = 50;

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// About `count` round tick values covering [lo, hi].
std::vector<double> Ticks(double lo, double hi, int count) {
  const double span = std::max(hi - lo, 1e-9);
  const double raw = span / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-6; t += step) ticks.push_back(t);
  return ticks;
}

// One panel: a frame at vertical offset `y0` mapping data [x0, x1] × [ylo, yhi]; x may be logarithmic.
class Panel {
 public:
  Panel(std::string* svg, double y0, const std::string& title, const std::string& x_label, const std::string& y_label,
        double x0, double x1, double ylo, double yhi, bool log_x)
      : svg_(svg), y0_(y0), x0_(x0), x1_(std::max(x1, x0 + 1e-9)), ylo_(ylo), yhi_(std::max(yhi, ylo + 1e-9)),
        log_x_(log_x) {
    const double w = kWidth - kLeft - kRight, h = kPanelHeight - kTop - kBottom;
    absl::StrAppend(svg_, absl::StrFormat("<text x='%.0f' y='%.0f' font-size='15' font-weight='bold'>%s</text>\n",
                                          kLeft, y0 + 22, Escape(title)));
    absl::StrAppend(svg_, absl::StrFormat("<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='none' "
                                          "stroke='#444'/>\n", kLeft, y0 + kTop, w, h));
    for (double t : Ticks(ylo_, yhi_, 5)) {
      absl::StrAppend(svg_, absl::StrFormat("<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>"
                                            "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>%g</text>\n",
                                            kLeft, Y(t), kWidth - kRight, Y(t), kLeft - 5, Y(t) + 4, t));
    }
    if (log_x_) {
      // Seven geometrically spaced ticks, rounded to two significant digits.
      for (int i = 0; i <= 6; ++i) {
        const double raw = x0_ * std::pow(x1_ / x0_, i / 6.0);
        const double scale = std::pow(10.0, std::floor(std::log10(raw)) - 1);
        const double t = std::round(raw / scale) * scale;
        absl::StrAppend(svg_, absl::StrFormat("<text x='%.1f' y='%.1f' font-size='11' "
                                              "text-anchor='middle'>%g</text>\n",
                                              X(t), y0 + kPanelHeight - kBottom + 16, t));
      }
    } else {
      for (double t : Ticks(x0_, x1_, 8)) {
        absl::StrAppend(svg_, absl::StrFormat("<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%g</text>\n",
                                              X(t), y0 + kPanelHeight - kBottom + 16, t));
      }
    }
    absl::StrAppend(svg_, absl::StrFormat("<text x='%.1f' y='%.1f' font-size='12' text-anchor='middle'>%s</text>\n",
                                          kLeft + w / 2, y0 + kPanelHeight - 12, Escape(x_label)));
    absl::StrAppend(svg_, absl::StrFormat("<text x='16' y='%.1f' font-size='12' text-anchor='middle' "
                                          "transform='rotate(-90 16 %.1f)'>%s</text>\n",
                                          y0 + kTop + h / 2, y0 + kTop + h / 2, Escape(y_label)));
  }

  double X(double x) const {
    const double w = kWidth - kLeft - kRight;
    const double f = log_x_ ? (std::log(x) - std::log(x0_)) / (std::log(x1_) - std::log(x0_)) : (x - x0_) / (x1_ - x0_);
    return kLeft + std::clamp(f, 0.0, 1.0) * w;
  }
  double Y(double y) const {
    const double h = kPanelHeight - kTop - kBottom;
    return y0_ + kTop + h - std::clamp((y - ylo_) / (yhi_ - ylo_), 0.0, 1.0) * h;
  }

  void Line(const std::vector<std::pair<double, double>>& points, const char* color, const std::string& legend,
            int legend_slot) {
    std::string path;
    for (const auto& [x, y] : points) absl::StrAppend(&path, absl::StrFormat("%.1f,%.1f ", X(x), Y(y)));
    absl::StrAppend(svg_, absl::StrFormat("<polyline fill='none' stroke='%s' stroke-width='1.8' points='%s'/>\n",
                                          color, path));
    const double lx = kWidth - kRight - 110, ly = y0_ + kTop + 16 + legend_slot * 16;
    absl::StrAppend(svg_, absl::StrFormat("<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='%s' stroke-width='3'/>"
                                          "<text x='%.0f' y='%.0f' font-size='12'>%s</text>\n",
                                          lx, ly - 4, lx + 20, ly - 4, color, lx + 26, ly, Escape(legend)));
  }

 private:
  std::string* svg_;
  double y0_, x0_, x1_, ylo_, yhi_;
  bool log_x_;
};

void TimelinePanel(const Report& r, double y0, std::string* svg) {
  double ymax = 0, tmax = 0;
  for (const TimelinePoint& p : r.timeline) {
    ymax = std::max(ymax, p.p99_ms);
    tmax = p.t_s + 1;
  }
  Panel panel(svg, y0, "Latency over time (successful requests, per 1 s window)",
              "seconds since the measured window began", "latency (ms)", 0, std::max(tmax, 1.0), 0,
              ymax * 1.1 + 1e-3, false);
  const struct {
    double TimelinePoint::*field;
    const char* color;
    const char* name;
  } series[] = {{&TimelinePoint::p50_ms, "#1f77b4", "p50"},
                {&TimelinePoint::p95_ms, "#ff7f0e", "p95"},
                {&TimelinePoint::p99_ms, "#d62728", "p99"}};
  int slot = 0;
  for (const auto& s : series) {
    std::vector<std::pair<double, double>> points;
    for (const TimelinePoint& p : r.timeline) {
      if (p.ok > 0) points.emplace_back(p.t_s + 0.5, p.*(s.field));
    }
    panel.Line(points, s.color, s.name, slot++);
  }
}

void HistogramPanel(const Histogram& h, const std::string& title, const std::string& x_label, const LatencyStats& l,
                    double y0, std::string* svg) {
  if (h.counts.empty()) {
    absl::StrAppend(svg, absl::StrFormat("<text x='%.0f' y='%.0f'>no successful requests</text>\n", kLeft, y0 + 40));
    return;
  }
  const int64_t top = *std::max_element(h.counts.begin(), h.counts.end());
  Panel panel(svg, y0, title, x_label, "count", h.edges_ms.front(), h.edges_ms.back(), 0, top * 1.1, true);
  for (size_t i = 0; i < h.counts.size(); ++i) {
    const double x0 = panel.X(h.edges_ms[i]), x1 = panel.X(h.edges_ms[i + 1]);
    absl::StrAppend(svg, absl::StrFormat("<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#4c78a8'/>\n", x0,
                                         panel.Y(h.counts[i]), std::max(x1 - x0 - 1, 0.5),
                                         panel.Y(0) - panel.Y(h.counts[i])));
  }
  int slot = 0;
  for (const auto& [value, name, color] :
       {std::tuple{l.p50_ms, "p50", "#1f77b4"}, std::tuple{l.p99_ms, "p99", "#d62728"}}) {
    const bool right_edge = panel.X(value) > kWidth - kRight - 80;  // label on the left of the line there
    absl::StrAppend(svg, absl::StrFormat("<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='%s' "
                                         "stroke-dasharray='4 3'/>"
                                         "<text x='%.1f' y='%.1f' font-size='11' fill='%s' text-anchor='%s'>"
                                         "%s %.1f</text>\n",
                                         panel.X(value), panel.Y(top * 1.1), panel.X(value), panel.Y(0), color,
                                         panel.X(value) + (right_edge ? -3 : 3), panel.Y(top * 1.1) + 12 + 12 * slot++,
                                         color, right_edge ? "end" : "start", name, value));
  }
}

// Generation: output tokens per second over the measured window.
void TokensPanel(const GenerationStats& g, double y0, std::string* svg) {
  double top = 0;
  std::vector<std::pair<double, double>> points;
  for (size_t i = 0; i < g.output_tokens_timeline.size(); ++i) {
    points.emplace_back(i + 0.5, g.output_tokens_timeline[i]);
    top = std::max(top, g.output_tokens_timeline[i]);
  }
  Panel panel(svg, y0, "Output tokens per second", "time since the window began (s)", "tokens/s", 0,
              std::max<double>(1, g.output_tokens_timeline.size()), 0, top * 1.1 + 1e-3, false);
  panel.Line(points, "#2ca02c", "output tokens/s", 0);
}

void SweepPanel(const Report& r, double y0, std::string* svg) {
  double xmax = 0, ymax = 0;
  for (const SweepStep& s : r.sweep) {
    xmax = std::max(xmax, s.summary.total.req_per_s);
    ymax = std::max(ymax, s.summary.total.latency.p99_ms);
  }
  Panel panel(svg, y0,
              absl::StrCat("Sweep over ", r.sweep.front().knob, ": latency vs throughput (green PASS, red FAIL)"),
              "throughput (successful req/s)", "latency (ms)", 0, xmax * 1.25 + 1e-3, 0, ymax * 1.1 + 1e-3, false);
  std::vector<std::pair<double, double>> p50, p99;
  for (const SweepStep& s : r.sweep) {
    p50.emplace_back(s.summary.total.req_per_s, s.summary.total.latency.p50_ms);
    p99.emplace_back(s.summary.total.req_per_s, s.summary.total.latency.p99_ms);
  }
  panel.Line(p50, "#1f77b4", "p50", 0);
  panel.Line(p99, "#d62728", "p99", 1);
  for (const SweepStep& s : r.sweep) {
    const double x = panel.X(s.summary.total.req_per_s), y = panel.Y(s.summary.total.latency.p99_ms);
    absl::StrAppend(svg, absl::StrFormat("<circle cx='%.1f' cy='%.1f' r='5' fill='%s'/>"
                                         "<text x='%.1f' y='%.1f' font-size='10'>%g</text>\n",
                                         x, y, s.pass ? "#2ca02c" : "#d62728", x + 6, y - 6, s.level));
  }
}

}  // namespace

std::string RenderSvg(const Report& r) {
  const int panels = 2 + (r.sweep.empty() ? 0 : 1) + (r.summary.generation ? 3 : 0);
  const double height = 40 + panels * kPanelHeight;
  std::string svg = absl::StrFormat(
      "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' viewBox='0 0 %.0f %.0f' "
      "font-family='sans-serif'>\n<rect width='100%%' height='100%%' fill='white'/>\n",
      kWidth, height, kWidth, height);
  const ThroughputStats& t = r.summary.total;
  absl::StrAppend(&svg, absl::StrFormat("<text x='%.0f' y='24' font-size='13'>%s — %s loop, %d ok, %.2f req/s, "
                                        "p50 %.1f ms, p99 %.1f ms</text>\n",
                                        kLeft, Escape(r.target), r.summary.mode, t.ok, t.req_per_s, t.latency.p50_ms,
                                        t.latency.p99_ms));
  double y = 40;
  TimelinePanel(r, y, &svg);
  y += kPanelHeight;
  HistogramPanel(r.histogram, "Latency histogram (log-spaced bins)", "latency (ms, log scale)",
                 r.summary.total.latency, y, &svg);
  y += kPanelHeight;
  if (r.summary.generation) {
    const GenerationStats& g = *r.summary.generation;
    HistogramPanel(r.ttft_histogram, "Time to first token (log-spaced bins)", "TTFT (ms, log scale)", g.ttft, y, &svg);
    y += kPanelHeight;
    HistogramPanel(r.itl_histogram, "Inter-token gaps (log-spaced bins)", "ITL (ms, log scale)", g.itl, y, &svg);
    y += kPanelHeight;
    TokensPanel(g, y, &svg);
    y += kPanelHeight;
  }
  if (!r.sweep.empty()) SweepPanel(r, y, &svg);
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

absl::Status WriteSvg(const Report& report, const std::string& path) {
  return WriteTextFile(path, RenderSvg(report));
}

}  // namespace sluice::loadtest
