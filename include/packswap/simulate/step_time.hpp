#pragma once

#include "packswap/balance/metrics.hpp"
#include "packswap/batch.hpp"
#include "packswap/detail/checked.hpp"
#include "packswap/error.hpp"
#include "packswap/span.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap {

/// How a step's pack exchange relates to its compute.
enum class exchange_mode {
  /// Before each micro-step, all ranks exchange its packs and wait for the slowest rank: the
  /// exchange adds max over ranks of its time, for every micro-step.
  synchronous,
  /// A background engine with two buffers receives micro-step m + 1's packs while micro-step m
  /// computes (DESIGN.md §1): only what exceeds the concurrent compute shows.
  overlapped,
};

/// When the first micro-step's packs move in the overlapped mode.
enum class first_exchange {
  /// At the start of the step, in full view: nothing computes before micro-step 0 (the default,
  /// and what an engine that prefetches only inside a step gives).
  exposed,
  /// During the previous step's last micro-step, which needs the next global batch's metadata one
  /// step early (a loader that runs a step ahead). The previous step's last micro-step is taken
  /// to be as long as this one's: the global batches are alike, and it keeps a step's time a
  /// function of that step alone.
  prefetched,
};

/// The stable names: `"synchronous"`, `"overlapped"`; `"exposed"`, `"prefetched"`.
[[nodiscard]] constexpr const char* to_string(exchange_mode m) noexcept {
  return m == exchange_mode::synchronous ? "synchronous" : "overlapped";
}
/// See `to_string(exchange_mode)`.
[[nodiscard]] constexpr const char* to_string(first_exchange f) noexcept {
  return f == first_exchange::exposed ? "exposed" : "prefetched";
}

/// Options of `step_time`.
struct timing_options {
  sync_mode sync = sync_mode::per_micro_step;         ///< where ranks meet: A or B
  exchange_mode exchange = exchange_mode::overlapped; ///< how the exchange runs
  first_exchange first = first_exchange::exposed;     ///< micro-step 0's exchange (overlapped)
};

/// One step's time, in microseconds.
struct step_timing {
  std::int64_t step_us = 0;       ///< the step, exposed exchange included
  std::int64_t compute_us = 0;    ///< the step without any exchange: A or B of the cell loads
  std::int64_t total_work_us = 0; ///< compute summed over every cell: dp x the ideal step
  /// Exchange time that was not hidden.
  [[nodiscard]] std::int64_t exposed_us() const noexcept { return step_us - compute_us; }
};

/// Straggler waste `1 - ideal / actual`, with ideal = `total_work_us / dp` (perfectly even load
/// in every micro-step): the share of GPU time spent waiting. Computed from the exact integer
/// idle time, so never negative for `step_us >= total_work_us / dp`, which every step satisfies;
/// 0 for an empty step.
[[nodiscard]] inline double waste(std::int64_t total_work_us, std::int32_t dp,
                                  std::int64_t step_us) {
  PACKSWAP_EXPECTS(dp >= 1 && total_work_us >= 0 && step_us >= 0, errc::invalid_argument,
                   "waste of total work " << total_work_us << " us over dp " << dp << " in "
                                          << step_us << " us: all must be >= 0, dp >= 1");
  const std::int64_t capacity = detail::checked_mul(step_us, dp, "dp x step time");
  PACKSWAP_EXPECTS(total_work_us <= capacity, errc::invalid_argument,
                   "total work " << total_work_us << " us exceeds dp " << dp << " x step "
                                 << step_us << " us");
  return capacity == 0
             ? 0.0
             : static_cast<double>(capacity - total_work_us) / static_cast<double>(capacity);
}

/// The time of one step from each cell's compute and exchange time (`[rank * ga + micro_step]`,
/// microseconds; `exchange` empty when nothing moves).
///
/// Compute alone gives A (`per_micro_step`: sum over micro-steps of the slowest rank) or B
/// (`per_step`: the slowest rank's total). With X_m = max over ranks of micro-step m's exchange:
/// - `synchronous`: step = A or B + sum over m of X_m.
/// - `overlapped`: an event model per rank with two pack buffers. Micro-step m's exchange starts
///   when m - 1's has finished and micro-step m - 2 has freed its buffer; micro-step m computes
///   once its packs are in and micro-step m - 1 is done (and, `per_micro_step`, every rank finished
///   m - 1). Micro-step 0's exchange runs at the start of the step (`exposed`) or during the
///   previous step's last micro-step (`prefetched`), showing only what exceeds it. Step: when the
///   last rank finishes. A rank's peers are taken to be ready when it is (a send waits for
///   nothing but its own link): optimistic for ranks that drift apart (`per_step`), nearly exact
///   for ranks that meet every micro-step, which start each micro-step together.
/// A synchronous exchange is a meeting too: in `per_step` mode it would also line the ranks'
/// compute up micro-step by micro-step. Only its time is added, which if anything flatters it.
///
/// Throws `errc::invalid_argument` for arrays of the wrong size or negative times. O(dp x ga).
///
/// ```
/// auto loads = packswap::cell_loads(costs, sol.cells, shape);
/// auto x = packswap::measure_exchange(meta, sol.cells, shape, net);
/// auto t = packswap::step_time(loads, x.time_us, shape, {packswap::sync_mode::per_micro_step,
///                                                        packswap::exchange_mode::overlapped});
/// double idle = packswap::waste(t.total_work_us, shape.dp, t.step_us);
/// ```
[[nodiscard]] inline step_timing step_time(span<const std::int64_t> compute,
                                           span<const std::int64_t> exchange, const shape& s,
                                           const timing_options& opt = {}) {
  validate(s);
  const auto n = static_cast<std::size_t>(s.cells());
  PACKSWAP_EXPECTS(compute.size() == n && (exchange.empty() || exchange.size() == n),
                   errc::invalid_argument,
                   "step_time got " << compute.size() << " compute and " << exchange.size()
                                    << " exchange times, dp=" << s.dp << " ga=" << s.ga << " needs "
                                    << n << " (or no exchange)");
  const auto dp = static_cast<std::size_t>(s.dp);
  const auto ga = static_cast<std::size_t>(s.ga);
  step_timing out;
  for (std::size_t c = 0; c < n; ++c) {
    PACKSWAP_EXPECTS(
        compute[c] >= 0 && (exchange.empty() || exchange[c] >= 0), errc::invalid_argument,
        "cell (rank " << c / ga << ", micro-step " << c % ga << ") has compute " << compute[c]
                      << " us, exchange " << (exchange.empty() ? 0 : exchange[c])
                      << " us; both must be >= 0");
    out.total_work_us = detail::checked_add(out.total_work_us, compute[c], "total compute");
  }
  const bool per_micro_step = opt.sync == sync_mode::per_micro_step;
  out.compute_us = per_micro_step ? step_time_a(compute, s) : step_time_b(compute, s);
  if (exchange.empty()) {
    out.step_us = out.compute_us;
    return out;
  }
  if (opt.exchange == exchange_mode::synchronous) {
    out.step_us = out.compute_us;
    for (std::size_t m = 0; m < ga; ++m) {
      std::int64_t slowest = 0;
      for (std::size_t r = 0; r < dp; ++r) {
        slowest = std::max(slowest, exchange[r * ga + m]);
      }
      out.step_us = detail::checked_add(out.step_us, slowest, "step time");
    }
    return out;
  }
  // Overlapped. Per rank: when its last exchange ended, and when its micro-steps m - 1 and m - 2
  // finished. Times are sums of at most 2 * ga inputs, each checked above to fit with the others.
  std::vector<std::int64_t> exchange_end(dp, 0);
  std::vector<std::int64_t> done_1(dp, 0); // micro-step m - 1 finished
  std::vector<std::int64_t> done_2(dp, 0); // micro-step m - 2 finished
  std::int64_t barrier = 0;                // every rank finished m - 1 (per_micro_step)
  // Ranks that meet every micro-step all spend the slowest rank's time in the last one.
  std::int64_t slowest_last = 0;
  for (std::size_t r = 0; r < dp; ++r) {
    slowest_last = std::max(slowest_last, compute[r * ga + ga - 1]);
  }
  for (std::size_t m = 0; m < ga; ++m) {
    std::int64_t next_barrier = 0;
    for (std::size_t r = 0; r < dp; ++r) {
      const std::int64_t x = exchange[r * ga + m];
      if (m == 0) {
        // Hidden behind the previous step's last micro-step, taken as long as this step's.
        const std::int64_t window = opt.first == first_exchange::exposed ? 0
                                    : per_micro_step                     ? slowest_last
                                                                         : compute[r * ga + ga - 1];
        exchange_end[r] = std::max<std::int64_t>(0, x - window);
      } else {
        exchange_end[r] = detail::checked_add(std::max(exchange_end[r], done_2[r]), x, "step time");
      }
      const std::int64_t start = std::max({exchange_end[r], done_1[r], barrier});
      const std::int64_t finish = detail::checked_add(start, compute[r * ga + m], "step time");
      done_2[r] = done_1[r];
      done_1[r] = finish;
      next_barrier = std::max(next_barrier, finish);
    }
    if (per_micro_step) {
      barrier = next_barrier;
    }
  }
  out.step_us = *std::max_element(done_1.begin(), done_1.end());
  return out;
}

} // namespace packswap
