#pragma once

#include "packswap/error.hpp"

#include <cmath>
#include <cstdint>

namespace packswap {

/// How many CTAs (thread blocks, so SMs) an exchange may take on a GPU.
///
/// An exchange kernel takes SMs that compute kernels need, so the exchange should take few CTAs
/// and still finish well inside the compute window. `automatic` picks the CTA count from the bytes
/// to move per micro-step and the measured compute time per micro-step (`choose_ctas`); `fixed`
/// lets the user decide; `nccl_default` leaves NCCL's own choice.
///
/// Measured (`./scripts/gpu-check`, H200, NCCL 2.28.9, world size 1, self-sends beside eight bf16
/// 8192^3 cuBLAS GEMMs of 11.3 ms per micro-step; medians over up to seven runs): one CTA moves
/// 47 GB/s. At 256 MiB per micro-step, 1 CTA (5.7 ms) exposed 0.18 ms and slowed the GEMMs by
/// 1.3%, 4 CTAs (1.5 ms) exposed 0.06 ms and slowed them by 0.3%. At 1 GiB, 4 CTAs (5.7 ms)
/// exposed 0.19 ms (slowdown 1.5%), 8 and 16 CTAs no less; 1 and 2 CTAs overrun the window.
/// Hence the floor `min_ctas` = 4 rather than the fewest CTAs that fit.
///
/// ```
/// auto p = packswap::cta_policy::automatic(); // the default
/// auto q = packswap::cta_policy::fixed(4);    // what DESIGN.md measured for 1 GiB per 10 ms
/// ```
struct cta_policy {
  enum class mode { nccl_default, fixed, automatic };
  mode kind = mode::automatic;
  /// `fixed`: the CTA count. `automatic`: the count used until compute time was measured.
  std::int32_t ctas = 4;
  /// `automatic`: the share of the compute window the exchange may fill (slack for jitter).
  double window_fraction = 0.7;
  /// `automatic`: what one CTA moves per second (H200, NCCL 2.28 self-exchange: 48 GB/s).
  double bytes_per_second_per_cta = 48e9;
  /// `automatic`: the fewest CTAs it will pick (see above: fewer, longer exchanges slowed the
  /// GEMMs more).
  std::int32_t min_ctas = 4;
  /// `automatic`: the most CTAs it will ever pick.
  std::int32_t max_ctas = 32;

  static cta_policy nccl_default() noexcept {
    cta_policy p;
    p.kind = mode::nccl_default;
    return p;
  }
  static cta_policy fixed(std::int32_t ctas) noexcept {
    cta_policy p;
    p.kind = mode::fixed;
    p.ctas = ctas;
    return p;
  }
  static cta_policy automatic() noexcept { return cta_policy{}; }

  /// Throws `errc::invalid_argument` unless the numbers make sense.
  void validate() const {
    PACKSWAP_EXPECTS(max_ctas >= 1 && max_ctas <= 64, errc::invalid_argument,
                     "cta_policy::max_ctas is " << max_ctas << ", must be in [1, 64]");
    PACKSWAP_EXPECTS(min_ctas >= 1 && min_ctas <= max_ctas, errc::invalid_argument,
                     "cta_policy::min_ctas is "
                         << min_ctas << ", must be in [1, max_ctas = " << max_ctas << "]");
    PACKSWAP_EXPECTS(
        kind == mode::nccl_default || (ctas >= 1 && ctas <= max_ctas), errc::invalid_argument,
        "cta_policy::ctas is " << ctas << ", must be in [1, max_ctas = " << max_ctas << "]");
    PACKSWAP_EXPECTS(window_fraction > 0 && window_fraction <= 1, errc::invalid_argument,
                     "cta_policy::window_fraction is " << window_fraction << ", must be in (0, 1]");
    PACKSWAP_EXPECTS(bytes_per_second_per_cta > 0, errc::invalid_argument,
                     "cta_policy::bytes_per_second_per_cta is " << bytes_per_second_per_cta
                                                                << ", must be positive");
  }
};

/// The fewest CTAs, but at least `min_ctas`, that move `bytes` (the most any rank sends or receives
/// in one micro-step) within `window_fraction` of `compute_ns` (the compute time of one
/// micro-step): `ceil(bytes / (bytes_per_second_per_cta * window_fraction * compute_seconds))`,
/// clamped to `[min_ctas, max_ctas]`; `min_ctas` when there is nothing to move; `p.ctas` while
/// nothing was measured (`compute_ns <= 0`). Pure and deterministic, so ranks that agree on the
/// inputs agree on the answer.
///
/// With the defaults, behind 10 ms of compute: 256 MiB and 1 GiB -> 4 CTAs, 4 GiB -> 13.
inline std::int32_t choose_ctas(std::int64_t bytes, std::int64_t compute_ns, const cta_policy& p) {
  p.validate();
  if (compute_ns <= 0) {
    return p.ctas;
  }
  if (bytes <= 0) {
    return p.min_ctas;
  }
  const double window_s = p.window_fraction * static_cast<double>(compute_ns) * 1e-9;
  const double need =
      std::ceil(static_cast<double>(bytes) / (p.bytes_per_second_per_cta * window_s));
  if (need >= static_cast<double>(p.max_ctas)) {
    return p.max_ctas;
  }
  return need < p.min_ctas ? p.min_ctas : static_cast<std::int32_t>(need);
}

} // namespace packswap
