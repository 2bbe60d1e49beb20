#pragma once

#include "packswap/batch.hpp"
#include "packswap/error.hpp"
#include "packswap/refine/topology.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

namespace packswap {

/// What stage 2 may trade and what it minimises.
struct refine_options {
  /// The sync mode stage 1 balanced for.
  sync_mode mode = sync_mode::per_micro_step;
  /// Balance that may be given up for less movement: B may exceed stage 1's B by this fraction
  /// (and, in `per_step` mode, A may exceed stage 1's A by it). In [0, 1]; resolved to parts per
  /// million, so every rank derives the same integer limits.
  double eps = 0.0;
  /// Node map and inter-node weight: stage 2 minimises the weighted moved bytes.
  packswap::topology topology{};
  /// Scales the work stage 2's searches may do (mbs = 1): their deterministic work bound, the
  /// fallback's allowance and the review's threshold are multiplied by it. Below 1 the solve's
  /// worst case is faster and searches that need more work give way to the fallback, which moves
  /// more bytes; above 1 the reverse. A and B hold at any value. In [0.001, 64]; resolved to parts
  /// per thousand, so every rank derives the same integer bounds. See docs/solver-worst-case.md.
  double work_scale = 1.0;
};

namespace detail {

// eps in parts per million; throws on values outside [0, 1] (NaN included).
inline std::int64_t eps_ppm(double eps) {
  PACKSWAP_EXPECTS(eps >= 0.0 && eps <= 1.0, errc::invalid_argument,
                   "eps is " << eps << ", must be in [0, 1]");
  return static_cast<std::int64_t>(std::llround(eps * 1e6));
}

// work_scale in parts per thousand; throws on values outside [0.001, 64] (NaN included).
inline std::int64_t work_permille(double scale) {
  PACKSWAP_EXPECTS(scale >= 0.001 && scale <= 64.0, errc::invalid_argument,
                   "work_scale is " << scale << ", must be in [0.001, 64]");
  return static_cast<std::int64_t>(std::llround(scale * 1000.0));
}

// Checks the options stage 2 reads (of `refine_options` or `solve_options`) for dp ranks: the
// topology covers them, eps and work_scale are in range; throws naming the offending value.
template <class Options>
void validate_stage2_options(const Options& opt, std::int32_t dp) {
  opt.topology.validate_for(dp);
  (void)eps_ppm(opt.eps);
  (void)work_permille(opt.work_scale);
}

// floor(x * (1 + ppm / 1e6)) for x >= 0 and ppm in [0, 1e6], saturated at the int64 maximum: a
// limit beyond it binds nothing (no load exceeds the batch's total cost).
inline std::int64_t relax(std::int64_t x, std::int64_t ppm) {
  const std::int64_t add = (x / 1000000) * ppm + (x % 1000000) * ppm / 1000000; // <= x
  return add > std::numeric_limits<std::int64_t>::max() - x
             ? std::numeric_limits<std::int64_t>::max()
             : x + add;
}

} // namespace detail

} // namespace packswap
