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
/// lets the user decide; `nccl_default` leaves NCCL's own choice. The defaults of `automatic`
/// (what one CTA moves, the floor of 4 CTAs) come from the overlap measurements in
/// docs/performance.md: fewer CTAs exchanging for longer slowed the compute more.
///
/// ```
/// auto p = packswap::cta_policy::automatic(); // the default
/// auto q = packswap::cta_policy::fixed(4);    // always 4 CTAs
/// ```
struct cta_policy {
  /// Who picks the CTA count.
  enum class mode {
    nccl_default, ///< NCCL, as for any communicator
    fixed,        ///< the user: `ctas`
    automatic     ///< `choose_ctas`, once the compute time per micro-step is known
  };
  mode kind = mode::automatic; ///< who picks the CTA count
  /// `fixed`: the CTA count. `automatic`: the count used until compute time was measured.
  std::int32_t ctas = 4;
  /// `automatic`: the share of the compute window the exchange may fill (slack for jitter).
  double window_fraction = 0.7;
  /// `automatic`: what one CTA moves per second.
  double bytes_per_second_per_cta = 48e9;
  /// `automatic`: the fewest CTAs it will pick (see above: fewer, longer exchanges slowed the
  /// GEMMs more).
  std::int32_t min_ctas = 4;
  /// `automatic`: the most CTAs it will ever pick.
  std::int32_t max_ctas = 32;

  /// NCCL's own CTA count.
  [[nodiscard]] static cta_policy nccl_default() noexcept {
    cta_policy p;
    p.kind = mode::nccl_default;
    return p;
  }
  /// Always `ctas` CTAs.
  [[nodiscard]] static cta_policy fixed(std::int32_t ctas) noexcept {
    cta_policy p;
    p.kind = mode::fixed;
    p.ctas = ctas;
    return p;
  }
  /// The default: `choose_ctas` with the defaults above.
  [[nodiscard]] static cta_policy automatic() noexcept { return cta_policy{}; }

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
[[nodiscard]] inline std::int32_t choose_ctas(std::int64_t bytes, std::int64_t compute_ns,
                                              const cta_policy& p) {
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
