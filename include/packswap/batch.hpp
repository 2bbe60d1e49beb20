#pragma once

#include "packswap/detail/checked.hpp"
#include "packswap/error.hpp"
#include "packswap/span.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap {

/// How often data-parallel ranks wait for each other, which decides what "balanced" means.
enum class sync_mode {
  /// Ranks meet at every micro-step (FSDP/ZeRO-3, expert-parallel all-to-all, tensor or context
  /// parallel collectives): step time is A = sum over micro-steps of the slowest rank's load.
  /// The solver minimises A, then B.
  per_micro_step,
  /// Ranks meet once per optimizer step (DDP gradient all-reduce): step time is B = the largest
  /// total load of one rank. The solver minimises B, then A.
  per_step,
};

/// The stable name of a sync mode: `"per-micro-step"` or `"per-step"`.
[[nodiscard]] constexpr const char* to_string(sync_mode mode) noexcept {
  return mode == sync_mode::per_step ? "per-step" : "per-micro-step";
}

/// The shape of one global batch: `dp` data-parallel ranks, `ga` gradient-accumulation
/// micro-steps, `mbs` packs per (rank, micro-step) cell. `validate(shape)` checks one; every
/// function that takes a shape does.
struct shape {
  std::int32_t dp = 1;  ///< data-parallel ranks, >= 1
  std::int32_t ga = 1;  ///< gradient-accumulation micro-steps per optimizer step, >= 1
  std::int32_t mbs = 1; ///< packs per (rank, micro-step) cell, >= 1

  /// Packs per rank, `ga * mbs`.
  [[nodiscard]] constexpr std::int64_t packs_per_rank() const noexcept {
    return static_cast<std::int64_t>(ga) * mbs;
  }
  /// Packs in the global batch, `dp * ga * mbs`.
  [[nodiscard]] constexpr std::int64_t packs() const noexcept { return packs_per_rank() * dp; }
  /// Cells in the global batch, `dp * ga`.
  [[nodiscard]] constexpr std::int64_t cells() const noexcept {
    return static_cast<std::int64_t>(dp) * ga;
  }
};

/// Throws `errc::invalid_argument` unless every dimension is at least 1 and the pack count fits
/// the 32-bit pack ids used throughout.
inline void validate(const shape& s) {
  PACKSWAP_EXPECTS(s.dp >= 1, errc::invalid_argument, "dp is " << s.dp << ", must be at least 1");
  PACKSWAP_EXPECTS(s.ga >= 1, errc::invalid_argument, "ga is " << s.ga << ", must be at least 1");
  PACKSWAP_EXPECTS(s.mbs >= 1, errc::invalid_argument,
                   "mbs is " << s.mbs << ", must be at least 1");
  PACKSWAP_EXPECTS(s.packs() <= INT32_MAX, errc::invalid_argument,
                   "dp * ga * mbs = " << s.dp << " * " << s.ga << " * " << s.mbs
                                      << " exceeds the 2^31 - 1 packs of one global batch");
}

/// Where one pack is computed: a data-parallel rank and a micro-step.
struct cell {
  std::int32_t rank = 0;       ///< in [0, dp)
  std::int32_t micro_step = 0; ///< in [0, ga)

  /// Same rank and micro-step.
  [[nodiscard]] friend constexpr bool operator==(const cell& a, const cell& b) noexcept {
    return a.rank == b.rank && a.micro_step == b.micro_step;
  }
  /// Another rank or micro-step.
  [[nodiscard]] friend constexpr bool operator!=(const cell& a, const cell& b) noexcept {
    return !(a == b);
  }
};

/// One cell per pack, indexed by pack id: stage 1's and stage 2's answer, checked by
/// `validate_assignment`.
using assignment = std::vector<cell>;

/// What every rank knows of every pack of the global batch: the few integers all-gathered once
/// per global batch. The pack's id is its index in the gathered array. `make_pack_meta`
/// (`packswap/cost/pack_meta.hpp`) builds them from packed samples; `validate_batch` checks them.
struct pack_meta {
  std::int64_t cost = 0;        ///< compute cost in the cost model's integer unit, >= 0
  std::int64_t bytes = 0;       ///< payload size in bytes, >= 0
  std::int32_t source_rank = 0; ///< the rank whose loader produced the pack
};

/// Throws `errc::invalid_argument` unless `costs` has one entry per pack of `s`, each >= 0, and
/// their sum fits `std::int64_t` (`errc::overflow` otherwise).
inline void validate_costs(span<const std::int64_t> costs, const shape& s) {
  validate(s);
  PACKSWAP_EXPECTS(static_cast<std::int64_t>(costs.size()) == s.packs(), errc::invalid_argument,
                   "got " << costs.size() << " packs, shape dp=" << s.dp << " ga=" << s.ga
                          << " mbs=" << s.mbs << " needs " << s.packs());
  std::int64_t total = 0;
  for (std::size_t p = 0; p < costs.size(); ++p) {
    PACKSWAP_EXPECTS(costs[p] >= 0, errc::invalid_argument,
                     "pack " << p << " has cost " << costs[p] << ", must be >= 0");
    PACKSWAP_EXPECTS(!detail::add_overflows(total, costs[p], total), errc::overflow,
                     "the cost sum overflows int64 at pack " << p << " (cost " << costs[p] << ")");
  }
}

/// Throws `errc::invalid_argument` unless `packs` describes one global batch of shape `s`: one
/// record per pack, costs and bytes >= 0 with sums that fit `std::int64_t`, and every source rank
/// in `[0, dp)` owning exactly `ga * mbs` packs.
inline void validate_batch(span<const pack_meta> packs, const shape& s) {
  validate(s);
  PACKSWAP_EXPECTS(static_cast<std::int64_t>(packs.size()) == s.packs(), errc::invalid_argument,
                   "got " << packs.size() << " packs, shape dp=" << s.dp << " ga=" << s.ga
                          << " mbs=" << s.mbs << " needs " << s.packs());
  std::vector<std::int64_t> owned(static_cast<std::size_t>(s.dp), 0);
  std::int64_t cost_sum = 0;
  std::int64_t byte_sum = 0;
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const pack_meta& m = packs[p];
    PACKSWAP_EXPECTS(m.cost >= 0, errc::invalid_argument,
                     "pack " << p << " has cost " << m.cost << ", must be >= 0");
    PACKSWAP_EXPECTS(m.bytes >= 0, errc::invalid_argument,
                     "pack " << p << " has " << m.bytes << " bytes, must be >= 0");
    PACKSWAP_EXPECTS(m.source_rank >= 0 && m.source_rank < s.dp, errc::invalid_argument,
                     "pack " << p << " has source rank " << m.source_rank << ", dp is " << s.dp);
    PACKSWAP_EXPECTS(!detail::add_overflows(cost_sum, m.cost, cost_sum), errc::overflow,
                     "the cost sum overflows int64 at pack " << p << " (cost " << m.cost << ")");
    PACKSWAP_EXPECTS(!detail::add_overflows(byte_sum, m.bytes, byte_sum), errc::overflow,
                     "the byte sum overflows int64 at pack " << p << " (" << m.bytes << " bytes)");
    ++owned[static_cast<std::size_t>(m.source_rank)];
  }
  for (std::int32_t r = 0; r < s.dp; ++r) {
    PACKSWAP_EXPECTS(
        owned[static_cast<std::size_t>(r)] == s.packs_per_rank(), errc::invalid_argument,
        "source rank " << r << " owns " << owned[static_cast<std::size_t>(r)]
                       << " packs, each rank must own ga * mbs = " << s.packs_per_rank());
  }
}

/// Throws `errc::invalid_argument` unless `a` puts every one of the `s.packs()` packs in a cell of
/// `s` and every cell holds exactly `mbs` packs.
inline void validate_assignment(const assignment& a, const shape& s) {
  validate(s);
  PACKSWAP_EXPECTS(static_cast<std::int64_t>(a.size()) == s.packs(), errc::invalid_argument,
                   "assignment has " << a.size() << " entries, shape needs " << s.packs());
  std::vector<std::int32_t> fill(static_cast<std::size_t>(s.cells()), 0);
  for (std::size_t p = 0; p < a.size(); ++p) {
    const cell c = a[p];
    PACKSWAP_EXPECTS(c.rank >= 0 && c.rank < s.dp && c.micro_step >= 0 && c.micro_step < s.ga,
                     errc::invalid_argument,
                     "pack " << p << " is assigned to (rank " << c.rank << ", micro-step "
                             << c.micro_step << "), outside dp=" << s.dp << " ga=" << s.ga);
    auto& n = fill[static_cast<std::size_t>(c.rank) * static_cast<std::size_t>(s.ga) +
                   static_cast<std::size_t>(c.micro_step)];
    ++n;
    PACKSWAP_EXPECTS(n <= s.mbs, errc::invalid_argument,
                     "cell (rank " << c.rank << ", micro-step " << c.micro_step
                                   << ") gets more than mbs = " << s.mbs << " packs (pack " << p
                                   << " is one too many)");
  }
}

} // namespace packswap
