#pragma once

// packswap-sim's figure: straggler waste against GPU count, one line per method, as a
// self-contained SVG (no fonts, scripts or images from elsewhere). Not part of the library.

#include <packswap/simulate/simulator.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace packswap::cli {

/// One line of packswap-sim's results.
struct run_row {
  std::int64_t dp = 0;
  std::int32_t ga = 0;
  method_summary summary;
};

namespace detail {

inline std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
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

inline std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

// A tick step of 1, 2 or 5 times a power of ten giving at most about 8 ticks up to `top`.
inline double tick_step(double top) {
  const double raw = top / 8.0;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) {
      return m * p;
    }
  }
  return 10.0 * p;
}

} // namespace detail

/// Writes waste (%) against GPU count (log-2 axis) for every method in `rows` as an SVG.
inline void write_waste_plot(std::ostream& out, const std::vector<run_row>& rows,
                             const std::string& subtitle) {
  // Colours that stay apart for colour-blind readers; the synchronous variant is dashed.
  struct style {
    const char* colour;
    const char* dash;
    const char* marker; // circle, square, triangle, diamond; empty: a plain line
  };
  const style styles[] = {{"#d62728", "", "circle"},
                          {"#9467bd", "", "square"},
                          {"#ff7f0e", "", "triangle"},
                          {"#1f77b4", "6,4", "diamond"},
                          {"#2ca02c", "", "circle"}};
  const double width = 820;
  const double height = 480;
  const double left = 72;
  const double right = 200;
  const double top = 64;
  const double bottom = 64;
  const double plot_w = width - left - right;
  const double plot_h = height - top - bottom;

  std::vector<std::int64_t> dps;
  double worst = 0.0;
  for (const auto& r : rows) {
    dps.push_back(r.dp);
    worst = std::max(worst, 100.0 * r.summary.waste);
  }
  std::sort(dps.begin(), dps.end());
  dps.erase(std::unique(dps.begin(), dps.end()), dps.end());
  double x_lo = dps.empty() ? 0.0 : std::log2(static_cast<double>(dps.front()));
  double x_hi = dps.empty() ? 1.0 : std::log2(static_cast<double>(dps.back()));
  if (x_hi - x_lo < 1e-9) {
    x_lo -= 0.5;
    x_hi += 0.5;
  }
  const double step = detail::tick_step(std::max(worst * 1.08, 1.0));
  const double y_hi = step * std::ceil(std::max(worst * 1.08, 1.0) / step);
  const auto x_of = [&](std::int64_t dp) {
    return left + (std::log2(static_cast<double>(dp)) - x_lo) / (x_hi - x_lo) * plot_w;
  };
  const auto y_of = [&](double pct) { return top + plot_h - pct / y_hi * plot_h; };

  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height
      << "\" font-family=\"Helvetica, Arial, sans-serif\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << left << "\" y=\"28\" font-size=\"19\" font-weight=\"bold\">"
      << "Straggler waste against GPU count</text>\n"
      << "<text x=\"" << left << "\" y=\"48\" font-size=\"13\" fill=\"#444\">"
      << detail::xml_escape(subtitle) << "</text>\n";
  // Grid and y ticks.
  for (double y = 0.0; y <= y_hi + 1e-9; y += step) {
    const double py = y_of(y);
    out << "<line x1=\"" << left << "\" y1=\"" << detail::fixed(py, 1) << "\" x2=\""
        << left + plot_w << "\" y2=\"" << detail::fixed(py, 1) << "\" stroke=\""
        << (y == 0.0 ? "#000" : "#ddd") << "\"/>\n"
        << "<text x=\"" << left - 8 << "\" y=\"" << detail::fixed(py + 4, 1)
        << "\" font-size=\"12\" text-anchor=\"end\">" << detail::fixed(y, step < 1.0 ? 1 : 0)
        << "%</text>\n";
  }
  // x ticks, one per GPU count.
  for (const auto dp : dps) {
    const double px = x_of(dp);
    out << "<line x1=\"" << detail::fixed(px, 1) << "\" y1=\"" << top << "\" x2=\""
        << detail::fixed(px, 1) << "\" y2=\"" << top + plot_h << "\" stroke=\"#eee\"/>\n"
        << "<line x1=\"" << detail::fixed(px, 1) << "\" y1=\"" << top + plot_h << "\" x2=\""
        << detail::fixed(px, 1) << "\" y2=\"" << top + plot_h + 5 << "\" stroke=\"#000\"/>\n"
        << "<text x=\"" << detail::fixed(px, 1) << "\" y=\"" << top + plot_h + 20
        << "\" font-size=\"12\" text-anchor=\"middle\">" << dp << "</text>\n";
  }
  out << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\""
      << top + plot_h << "\" stroke=\"#000\"/>\n"
      << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << height - 16
      << "\" font-size=\"14\" text-anchor=\"middle\">GPUs (data-parallel ranks, log scale)</text>\n"
      << "<text transform=\"translate(20," << top + plot_h / 2
      << ") rotate(-90)\" font-size=\"14\" text-anchor=\"middle\">"
      << "waste: idle share of GPU time (%)</text>\n";

  const auto marker = [&](const style& st, double px, double py) {
    std::ostringstream m;
    const std::string x = detail::fixed(px, 1);
    const std::string y = detail::fixed(py, 1);
    const std::string shape = st.marker;
    if (shape == "square") {
      m << "<rect x=\"" << detail::fixed(px - 4, 1) << "\" y=\"" << detail::fixed(py - 4, 1)
        << "\" width=\"8\" height=\"8\"";
    } else if (shape == "triangle") {
      m << "<polygon points=\"" << x << "," << detail::fixed(py - 5, 1) << " "
        << detail::fixed(px - 5, 1) << "," << detail::fixed(py + 4, 1) << " "
        << detail::fixed(px + 5, 1) << "," << detail::fixed(py + 4, 1) << "\"";
    } else if (shape == "diamond") {
      m << "<polygon points=\"" << x << "," << detail::fixed(py - 5, 1) << " "
        << detail::fixed(px + 5, 1) << "," << y << " " << x << "," << detail::fixed(py + 5, 1)
        << " " << detail::fixed(px - 5, 1) << "," << y << "\"";
    } else {
      m << "<circle cx=\"" << x << "\" cy=\"" << y << "\" r=\"4\"";
    }
    m << " fill=\"" << st.colour << "\"/>\n";
    return m.str();
  };

  const auto legend = [&](std::size_t row, const style& st, const std::string& name) {
    const double ly = top + 14 + 26.0 * static_cast<double>(row);
    const double lx = left + plot_w + 18;
    out << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 30 << "\" y2=\"" << ly
        << "\" stroke=\"" << st.colour << "\" stroke-width=\"2.2\"";
    if (*st.dash != '\0') {
      out << " stroke-dasharray=\"" << st.dash << "\"";
    }
    out << "/>\n";
    if (*st.marker != '\0') {
      out << marker(st, lx + 15, ly);
    }
    out << "<text x=\"" << lx + 38 << "\" y=\"" << ly + 4 << "\" font-size=\"13\">"
        << detail::xml_escape(name) << "</text>\n";
  };
  const auto line = [&](const style& st, std::vector<std::pair<std::int64_t, double>> points) {
    std::sort(points.begin(), points.end());
    out << "<polyline fill=\"none\" stroke=\"" << st.colour << "\" stroke-width=\""
        << (*st.marker != '\0' ? "2.2" : "1.5") << "\"";
    if (*st.dash != '\0') {
      out << " stroke-dasharray=\"" << st.dash << "\"";
    }
    out << " points=\"";
    for (const auto& [dp, w] : points) {
      out << detail::fixed(x_of(dp), 1) << "," << detail::fixed(y_of(w), 1) << " ";
    }
    out << "\"/>\n";
    if (*st.marker != '\0') {
      for (const auto& [dp, w] : points) {
        out << marker(st, x_of(dp), y_of(w));
      }
    }
  };

  // The floor no placement of the same 1D packs goes below, from the baseline's figures: with
  // ideal / step = 1 - waste and step / best = 1 + over_best, best's waste is
  // 1 - (1 - waste) * (1 + over_best).
  const style best_style{"#777", "2,3", ""};
  std::vector<std::pair<std::int64_t, double>> best_points;
  for (const auto& r : rows) {
    if (r.summary.method == method::baseline) {
      const double w = 1.0 - (1.0 - r.summary.waste) * (1.0 + r.summary.over_best);
      best_points.emplace_back(r.dp, 100.0 * std::max(0.0, w));
    }
  }
  line(best_style, best_points);
  // One line per method; the synchronous variant last, so its dashes show over the other.
  const std::size_t draw_order[] = {0, 1, 2, 4, 3};
  for (const std::size_t i : draw_order) {
    std::vector<std::pair<std::int64_t, double>> points;
    for (const auto& r : rows) {
      if (r.summary.method == all_methods[i]) {
        points.emplace_back(r.dp, 100.0 * r.summary.waste);
      }
    }
    line(styles[i], points);
  }
  for (std::size_t i = 0; i < all_methods.size(); ++i) {
    legend(i, styles[i], to_string(all_methods[i]));
  }
  legend(all_methods.size(), best_style, "best placement");
  out << "</svg>\n";
}

} // namespace packswap::cli
