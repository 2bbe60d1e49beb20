#pragma once

#include "packswap/cost/cost_model.hpp"
#include "packswap/cost/features.hpp"
#include "packswap/error.hpp"
#include "packswap/span.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

namespace packswap {

/// The terms of `cost_model`, in its order.
enum class cost_term {
  pack,                ///< 1 for every pack: `cost_model::pack_fs`
  vit_fixed,           ///< 1 for a pack with an image: `vit_fixed_fs`
  vit_per_image_token, ///< image tokens: `vit_per_image_token_fs`
  vit_attention,       ///< sum over images of tokens^2: `vit_attention_fs`
  llm_per_token,       ///< tokens: `llm_per_token_fs`
  llm_attention,       ///< sum over documents of length^2: `llm_attention_fs`
};

/// The stable name of a term, e.g. `"vit_per_image_token"`.
[[nodiscard]] constexpr const char* to_string(cost_term t) noexcept {
  switch (t) {
  case cost_term::pack:
    return "pack";
  case cost_term::vit_fixed:
    return "vit_fixed";
  case cost_term::vit_per_image_token:
    return "vit_per_image_token";
  case cost_term::vit_attention:
    return "vit_attention";
  case cost_term::llm_per_token:
    return "llm_per_token";
  case cost_term::llm_attention:
    return "llm_attention";
  }
  return "unknown";
}

/// All six terms.
inline constexpr std::array<cost_term, 6> all_cost_terms = {
    cost_term::pack,          cost_term::vit_fixed,     cost_term::vit_per_image_token,
    cost_term::vit_attention, cost_term::llm_per_token, cost_term::llm_attention};

/// One measurement: a pack's features and the time it took, forward plus backward.
struct pack_timing {
  pack_features features;    ///< what the pack held
  double microseconds = 0.0; ///< its measured forward + backward time, >= 0
};

/// What `calibrate` found.
struct calibration {
  cost_model model; ///< fitted coefficients; terms not fitted are 0
  /// Terms the unconstrained fit made negative: fixed at 0, and the others fitted again.
  std::vector<cost_term> zeroed;
  double rms_error_us = 0.0; ///< root mean square of model(features) - measured, over the rows
  double max_error_us = 0.0; ///< largest |model(features) - measured|
  double r_squared = 0.0;    ///< 1 - residual sum of squares / total sum of squares
};

namespace detail {

inline double term_value(const pack_features& f, cost_term t) noexcept {
  switch (t) {
  case cost_term::pack:
    return 1.0;
  case cost_term::vit_fixed:
    return f.images > 0 ? 1.0 : 0.0;
  case cost_term::vit_per_image_token:
    return static_cast<double>(f.image_tokens);
  case cost_term::vit_attention:
    return static_cast<double>(f.image_tokens_sq);
  case cost_term::llm_per_token:
    return static_cast<double>(f.tokens);
  case cost_term::llm_attention:
    return static_cast<double>(f.document_tokens_sq);
  }
  return 0.0;
}

inline std::int64_t& coefficient(cost_model& m, cost_term t) noexcept {
  switch (t) {
  case cost_term::pack:
    return m.pack_fs;
  case cost_term::vit_fixed:
    return m.vit_fixed_fs;
  case cost_term::vit_per_image_token:
    return m.vit_per_image_token_fs;
  case cost_term::vit_attention:
    return m.vit_attention_fs;
  case cost_term::llm_per_token:
    return m.llm_per_token_fs;
  case cost_term::llm_attention:
    break;
  }
  return m.llm_attention_fs;
}

// Least squares min |A x - b| by Householder QR on A (m rows, k columns, column-major), with
// columns scaled to unit norm first so that terms of very different magnitude (1 next to
// tokens^2) are conditioned alike. Throws when a column is zero or numerically a combination of
// the columns before it.
inline std::vector<double> least_squares(std::vector<double> a, std::vector<double> b,
                                         std::size_t m, span<const cost_term> terms) {
  const std::size_t k = terms.size();
  std::vector<double> scale(k);
  for (std::size_t j = 0; j < k; ++j) {
    double norm = 0.0;
    for (std::size_t i = 0; i < m; ++i) {
      norm = std::hypot(norm, a[j * m + i]);
    }
    PACKSWAP_EXPECTS(norm > 0.0, errc::invalid_argument,
                     "term '" << to_string(terms[j])
                              << "' is zero in every measurement, so it cannot be fitted");
    scale[j] = norm;
    for (std::size_t i = 0; i < m; ++i) {
      a[j * m + i] /= norm;
    }
  }
  // A threshold on R's diagonal for unit columns: below it, column j is within that distance of
  // the span of the columns before it.
  constexpr double dependent = 1e-9;
  std::vector<double> diag(k);
  for (std::size_t j = 0; j < k; ++j) {
    double* col = &a[j * m];
    double norm = 0.0;
    for (std::size_t i = j; i < m; ++i) {
      norm = std::hypot(norm, col[i]);
    }
    PACKSWAP_EXPECTS(norm > dependent, errc::invalid_argument,
                     "term '" << to_string(terms[j])
                              << "' is (nearly) a combination of the terms before it in these "
                                 "measurements (e.g. 'vit_fixed' next to 'pack' when every pack "
                                 "has an image): measure more varied packs or drop a term");
    // Reflect col[j..m) onto -sign(col[j]) * norm * e_j; the sign avoids cancellation.
    const double alpha = col[j] > 0 ? -norm : norm;
    col[j] -= alpha;
    double vnorm2 = 0.0;
    for (std::size_t i = j; i < m; ++i) {
      vnorm2 += col[i] * col[i];
    }
    const auto reflect = [&](double* y) {
      double dot = 0.0;
      for (std::size_t i = j; i < m; ++i) {
        dot += col[i] * y[i];
      }
      const double f = 2.0 * dot / vnorm2;
      for (std::size_t i = j; i < m; ++i) {
        y[i] -= f * col[i];
      }
    };
    for (std::size_t c = j + 1; c < k; ++c) {
      reflect(&a[c * m]);
    }
    reflect(b.data());
    diag[j] = alpha;
  }
  std::vector<double> x(k);
  for (std::size_t j = k; j-- > 0;) {
    double s = b[j];
    for (std::size_t c = j + 1; c < k; ++c) {
      s -= a[c * m + j] * x[c];
    }
    x[j] = s / diag[j];
  }
  for (std::size_t j = 0; j < k; ++j) {
    x[j] /= scale[j];
  }
  return x;
}

} // namespace detail

/// Fits the coefficients of `terms` (the others stay 0) to measured pack times by least squares,
/// and returns them as a `cost_model`.
///
/// The fit runs in double precision with Householder QR on column-scaled data, which stays
/// accurate where the normal equations would square the condition number (the terms range from 1
/// to tokens^2). Coefficients must be >= 0: when the fit makes some negative, the most negative
/// is fixed at 0 and the rest fitted again, until none is (listed in `calibration::zeroed`). Each
/// coefficient, in microseconds per unit, becomes femtoseconds rounded to the nearest integer
/// (`std::llround`), so the fitted model is as deterministic as any other.
///
/// Throws `errc::invalid_argument` when `terms` is empty or repeats a term, when there are fewer
/// rows than terms, for a time that is negative or not finite (naming the row), and when the
/// measurements cannot tell a term apart from the others (naming the term); `errc::overflow` when
/// a coefficient does not fit `std::int64_t` femtoseconds.
///
/// ```
/// using packswap::cost_term;
/// std::vector<packswap::pack_timing> rows = measure(); // features + measured microseconds
/// auto fit = packswap::calibrate(rows, {cost_term::vit_fixed, cost_term::vit_per_image_token});
/// packswap::cost_model model = fit.model;
/// ```
[[nodiscard]] inline calibration calibrate(span<const pack_timing> rows,
                                           span<const cost_term> terms) {
  PACKSWAP_EXPECTS(!terms.empty(), errc::invalid_argument, "no cost term to fit");
  for (std::size_t j = 0; j < terms.size(); ++j) {
    for (std::size_t c = 0; c < j; ++c) {
      PACKSWAP_EXPECTS(terms[c] != terms[j], errc::invalid_argument,
                       "term '" << to_string(terms[j]) << "' is listed twice");
    }
  }
  PACKSWAP_EXPECTS(rows.size() >= terms.size(), errc::invalid_argument,
                   rows.size() << " measurements cannot fit " << terms.size() << " terms");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    PACKSWAP_EXPECTS(
        std::isfinite(rows[i].microseconds) && rows[i].microseconds >= 0.0, errc::invalid_argument,
        "measurement " << i << " took " << rows[i].microseconds << " us, must be finite and >= 0");
  }
  const std::size_t m = rows.size();
  std::vector<cost_term> active(terms.begin(), terms.end());
  calibration out;
  out.model = cost_model{0, 0, 0, 0, 0, 0};
  std::vector<double> x;
  for (;;) {
    std::vector<double> a(m * active.size());
    std::vector<double> b(m);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < active.size(); ++j) {
        a[j * m + i] = detail::term_value(rows[i].features, active[j]);
      }
      b[i] = rows[i].microseconds;
    }
    x = detail::least_squares(std::move(a), std::move(b), m, active);
    std::size_t worst = active.size();
    for (std::size_t j = 0; j < active.size(); ++j) {
      if (x[j] < 0.0 && (worst == active.size() || x[j] < x[worst])) {
        worst = j;
      }
    }
    if (worst == active.size()) {
      break;
    }
    out.zeroed.push_back(active[worst]);
    active.erase(active.begin() + static_cast<std::ptrdiff_t>(worst));
    if (active.empty()) {
      x.clear();
      break;
    }
  }
  for (std::size_t j = 0; j < active.size(); ++j) {
    const double fs = x[j] * 1e9;
    PACKSWAP_EXPECTS(fs < 9.2e18, errc::overflow,
                     "term '" << to_string(active[j]) << "' fits " << x[j]
                              << " us per unit, which overflows int64 femtoseconds");
    detail::coefficient(out.model, active[j]) = std::llround(fs);
  }
  double mean = 0.0;
  for (const auto& r : rows) {
    mean += r.microseconds / static_cast<double>(m);
  }
  double ss_res = 0.0;
  double ss_tot = 0.0;
  for (const auto& r : rows) {
    const double e = static_cast<double>(out.model(r.features)) - r.microseconds;
    ss_res += e * e;
    ss_tot += (r.microseconds - mean) * (r.microseconds - mean);
    out.max_error_us = std::max(out.max_error_us, std::abs(e));
  }
  out.rms_error_us = std::sqrt(ss_res / static_cast<double>(m));
  out.r_squared = ss_tot > 0.0 ? 1.0 - ss_res / ss_tot : 1.0;
  return out;
}

/// `calibrate` with the terms listed in place.
[[nodiscard]] inline calibration calibrate(span<const pack_timing> rows,
                                           std::initializer_list<cost_term> terms) {
  return calibrate(rows, span<const cost_term>(terms.begin(), terms.size()));
}

/// `calibrate` with all six terms.
[[nodiscard]] inline calibration calibrate(span<const pack_timing> rows) {
  return calibrate(rows, span<const cost_term>(all_cost_terms.data(), all_cost_terms.size()));
}

} // namespace packswap
