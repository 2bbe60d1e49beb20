#pragma once

// What a stage-2 search runs with besides its state: the knobs of one attempt (`tuning`) and the
// caller's review of a long search (`review_hook`).

#include <cstdint>

namespace packswap::detail::stage2 {

/// Knobs of one attempt of stage 2 (see `home_first`); the refiner tries a few.
struct tuning {
  /// The pinning band, as per-mille quantiles of all costs: a rank with f free slots keeps
  /// capacity between f * q(low) and f * q(high).
  std::int32_t band_low_permille = 50;
  std::int32_t band_high_permille = 950;
  /// Cost-index entries scanned per pack when searching a repair swap, and levels of the rank
  /// above the limit read per level of a partner where levels have slack: a repair step weighs
  /// up to 3 scan_limit candidates per pick. With many ranks above a tight limit (eps = 0, a
  /// thousand ranks) the repair needs about one step per rank within the work bound, which a
  /// wider scan leaves no room for.
  std::int32_t scan_limit = 8;
  /// Repair swaps allowed, per pack of the batch, before the attempt gives up.
  std::int32_t repair_swaps_per_pack = 2;
  /// Passes of the bring-home step.
  std::int32_t home_passes = 1;
  /// Ranks with the most room tried as partners of every repair swap.
  std::int32_t roomy_partners = 8;
  /// Sweeps of the re-deal step over all levels.
  std::int32_t redeal_sweeps = 2;
  /// Packs of a rank above the limit tried per repair step, of each kind (see
  /// repair_phase::pick): those that can shed its excess, and those that can shed the most.
  std::int32_t repair_picks = 16;
  /// Rounds in which ranks stuck far below the limit unlock one home pack each (and up to as
  /// many more while a crowd of ranks just above it shrinks, in batches under 65,536 packs only
  /// while it is above the limit by a hair, see redeal_phase).
  std::int32_t unlock_rounds = 4;
  /// The fewest ranks just above the limit that unlock one home pack each, as a crowd, beside an
  /// eighth of all ranks (see redeal_phase::redeal_rounds); above dp, never.
  std::int32_t crowd_min = 64;
  /// Rounds in which the ranks the repair cannot fix give up all their pins before the attempt
  /// fails (fewer when a round gets no nearer than the one before it, see `home_first::run`).
  /// With the repair going on past such ranks, the rounds mostly shrink the excess by a large
  /// factor each (`high-res` at dp 4,096 x ga 4, eps 0, seed 1: 27 million us, then 0.35
  /// million, 25,200, 2,520, 840, none in the sixth), so they are allowed eight.
  std::int32_t stuck_rounds = 8;
  /// Where no single swap helps a rank, try two swaps in a chain (`chain_search`): a wider
  /// search, for the attempt made after the others failed.
  bool chains = false;
  /// Chains allowed per repair.
  std::int32_t chain_steps = 256;
  /// Packs tried per rank of a chain (of each kind, see repair_phase::pick) and cost-index
  /// entries on each side of the target per pack: a chain search weighs up to
  /// (2 chain_picks 2 chain_width)^2 pairs of swaps.
  std::int32_t chain_picks = 16;
  std::int32_t chain_width = 8;
};

/// A search's review (see home_first::review_at): a callable the caller owns, called once,
/// which tells whether the search is abandoned for the fallback. Holds no copy: the callable
/// must outlive the search it reviews.
class review_hook {
 public:
  review_hook() = default;
  template <class F>
  explicit review_hook(const F& f)
      : target_(&f),
        call_([](const void* t) { return static_cast<bool>((*static_cast<const F*>(t))()); }) {}

  explicit operator bool() const { return call_ != nullptr; }
  bool operator()() const { return call_(target_); }

 private:
  const void* target_ = nullptr;
  bool (*call_)(const void*) = nullptr;
};

} // namespace packswap::detail::stage2
