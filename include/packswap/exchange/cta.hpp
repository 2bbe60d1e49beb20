#pragma once

#include "packswap/error.hpp"

#include <cmath>
#include <cstdint>

namespace packswap {

/// How many CTAs (thread blocks, so SMs) an exchange may take on a GPU.
///
/// Measured on an H200 next to ~10 ms of bf16 GEMMs (DESIGN.md §5): with NCCL's default settings a
/// 256 MiB self-exchange (0.16 ms alone) delays the GEMMs by 0.8-1.2 ms because its kernel takes
/// SMs the GEMMs need; limited to 4 CTAs, 1 GiB takes 6 ms and hides completely; at 1 CTA it
/// crawls at 48 GB/s. So the exchange should take the fewest CTAs that still finish it well inside
/// the compute window. `automatic` picks that number from the bytes to move per micro-step and the
/// measured compute time per micro-step (`choose_ctas`); `fixed` lets the user decide;
/// `nccl_default` leaves NCCL's own choice (fast alone, contends with compute).
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

/// The fewest CTAs that move `bytes` (the most any rank sends or receives in one micro-step)
/// within `window_fraction` of `compute_ns` (the compute time of one micro-step):
/// `ceil(bytes / (bytes_per_second_per_cta * window_fraction * compute_seconds))`, clamped to
/// `[1, max_ctas]`; `p.ctas` while nothing was measured (`compute_ns <= 0`). Pure and
/// deterministic, so ranks that agree on the inputs agree on the answer.
///
/// With the defaults, behind 10 ms of compute: 256 MiB -> 1 CTA, 1 GiB -> 4 CTAs.
inline std::int32_t choose_ctas(std::int64_t bytes, std::int64_t compute_ns, const cta_policy& p) {
  p.validate();
  if (compute_ns <= 0) {
    return p.ctas;
  }
  if (bytes <= 0) {
    return 1;
  }
  const double window_s = p.window_fraction * static_cast<double>(compute_ns) * 1e-9;
  const double need =
      std::ceil(static_cast<double>(bytes) / (p.bytes_per_second_per_cta * window_s));
  if (need >= static_cast<double>(p.max_ctas)) {
    return p.max_ctas;
  }
  return need < 1 ? 1 : static_cast<std::int32_t>(need);
}

} // namespace packswap
