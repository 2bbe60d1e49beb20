#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/detail/products.hpp"
#include "packswap/detail/sort.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace packswap::detail::stage2 {

/// Stage 2, phase 3: re-deal. Balances the loads by re-dealing the unlocked packs of each level,
/// and unlocks pins of ranks far from the limit (or of a crowd of ranks just above it, and in
/// large batches of a few).
///
/// Every rank keeps as many packs of each level as it had, so the level constraints hold as they
/// did; no sweep raises the largest load. Ends with every pack's place written back (not
/// through swap_packs: the level lists are stale until a later phase indexes them again).
///
/// Complexity: per sweep, one sort and one linear pass per level over its unlocked packs
/// (`order_asc`: radix passes from 1,024 packs, and from 128 where the keys lie far from their
/// order; below, a bucket pass and insertion): O(n log dp) per sweep at worst; per unlock
/// round O(dp) plus O(k) per far rank (O(k log k) for a rank above the limit in a large batch,
/// see unlock_to_cover(); O(k) where one pin covers it) and a merge of the unlocked list (O(k) to
/// shift the levels' stretches, plus the unlocked packs and the fresh ones sorted). At most
/// redeal_sweeps (2 unlock_rounds + 1) sweeps per run (past unlock_rounds + 1 only while a crowd
/// of ranks just above the limit shrinks or its summed excess falls by an eighth, and in batches
/// under 65,536 packs only while it is above the limit by a hair, see redeal_rounds()).
class redeal_phase {
 public:
  // (2a) Re-deal sweeps; then ranks still far from the limit unlock one pinned home pack each and
  // the sweeps run again, spreading the correction over every rank. A rank far below the limit
  // (its unlocked packs are already the heaviest of their levels) unlocks the pack that could
  // rise most per byte, up to the heaviest unlocked pack of its level; a rank far above it the
  // pack that could fall most per byte, down to the lightest (in large batches, as many such
  // packs as its excess needs, see unlock_to_cover()).
  //
  // The sweeps move unlocked packs only, in their own arrays (see collect_unlocked()), which the
  // packs unlocked by each round join; the places go back into the pack records and items once,
  // at the end. Until then the unlock search reads only what does not move: st.load, and the
  // locked packs among a rank's items (an unlocked place may hold a stale entry, but always one
  // of an unlocked pack, which the search skips).
  void run(state& st, const tuning& t) {
    st.levels_live = false; // places move without swap_packs()
    collect_unlocked(st);
    redeal_rounds(st, t);
    store_unlocked(st);
  }

 private:
  void redeal_rounds(state& st, const tuning& t) {
    std::vector<std::int64_t> heaviest(st.k);
    std::vector<std::int64_t> lightest(st.k);
    auto& fresh = fresh_unlocked_;
    std::size_t crowd_before = std::numeric_limits<std::size_t>::max(); // see below
    std::int64_t excess_before = std::numeric_limits<std::int64_t>::max();
    bool crowd_last = false;
    const bool large = st.n >= more_crowds_from; // see below
    const std::int32_t last_round = 2 * t.unlock_rounds;
    const std::size_t crowd_size =
        std::max(st.dp / 8, static_cast<std::size_t>(std::max(0, t.crowd_min)));
    for (std::int32_t round = 0;; ++round) {
      for (std::int32_t sweep = 0; sweep < t.redeal_sweeps; ++sweep) {
        if (!redeal(st)) {
          break;
        }
      }
      if (round >= t.unlock_rounds && (!crowd_last || round >= last_round)) {
        break;
      }
      // The mean room of a rank, floor(sum / dp) as quotient and remainder: with costs near the
      // int64 limit the sum itself would overflow.
      const auto dp = static_cast<std::int64_t>(st.dp);
      std::int64_t room_mean = 0;
      std::int64_t room_rest = 0;
      std::size_t over = 0;        // ranks above the limit
      std::int64_t excess_sum = 0; // their excess summed, saturated
      for (std::size_t r = 0; r < st.dp; ++r) {
        const std::int64_t room = std::max<std::int64_t>(0, st.limit - st.load[r]);
        room_mean += room / dp;
        room_rest += room % dp;
        if (room_rest >= dp) {
          ++room_mean;
          room_rest -= dp;
        }
        const std::int64_t e = st.excess(r);
        over += e > 0 ? 1 : 0;
        excess_sum = e > std::numeric_limits<std::int64_t>::max() - excess_sum
                         ? std::numeric_limits<std::int64_t>::max()
                         : excess_sum + e;
      }
      if (over == 0) {
        return;
      }
      // Each level's unlocked packs run by cost descending.
      for (std::size_t l = 0; l < st.k; ++l) {
        const bool any = unlocked_start_[l + 1] > unlocked_start_[l];
        heaviest[l] = any ? unlocked_cost_[unlocked_start_[l]] : -1;
        lightest[l] = any ? unlocked_cost_[unlocked_start_[l + 1] - 1] : -1;
      }
      // Far: a rank holding 16 times its share of all room, or above the limit by more than the
      // typical room of a rank.
      // floor(16 * sum / dp), saturated.
      const std::int64_t far_below =
          room_mean > std::numeric_limits<std::int64_t>::max() / 32
              ? std::numeric_limits<std::int64_t>::max()
              : std::max<std::int64_t>(1, 16 * room_mean + 16 * room_rest / dp);
      const std::int64_t far_above = std::max<std::int64_t>(1, room_mean);
      // The far ranks first, so that each one's item records can be fetched while the one
      // before it is searched: they are few and scattered.
      auto& far = far_ranks_;
      far.clear();
      for (std::size_t r = 0; r < st.dp; ++r) {
        if (st.limit - st.load[r] >= far_below || st.load[r] - st.limit >= far_above) {
          far.push_back(static_cast<std::int32_t>(r));
        }
      }
      // A crowd just above the limit: with the limit within a hair of the mean load (as
      // Karmarkar-Karp's B often is at eps 0), the sweeps can leave most ranks above it by less
      // than the mean room, none of them far, and the repair would fix them one step each. In
      // the last round, and in a later round that finds no far rank, every rank above the limit
      // counts as far while they are many (an eighth of the ranks, and t.crowd_min) and fewer
      // than the last time they did. In batches of `more_crowds_from` packs or more, while a
      // crowd round leaves them so, crowd rounds go on past t.unlock_rounds, up to twice as many
      // rounds in all: the sweeps after each start from a better balance. (`high-res` at dp
      // 16,384 x ga 16, eps 0: 14,452 ranks above the limit before the first crowd round, 11,344
      // after it, and none after the second, where the repair had taken 2 million units of work
      // to fix 4,109 of them and then stuck.) These further rounds also go on while the crowd's
      // summed excess falls by an eighth or more, though the crowd itself may not shrink: the
      // sweeps can spread a few large excesses over more ranks, each nearer the limit.
      // (`vlm-pretrain` at dp 1,024 x ga 256, eps 0, seed 3: 918 ranks above the limit by 7.85
      // million us in all before the first crowd round, 932 by 4.70 million after it, 1.17 million
      // and 0.15 million after the next two, then none; the repair's work 4.09 -> 0.73 million
      // units.) Each round unlocks more pins, which can cost bytes: in smaller batches, where the
      // repair's work costs milliseconds at most, the rounds moved more bytes on the benchmark
      // workloads (`high-res` 256 x 16 at eps 0 over 100 seeds: mean 0.479 of Karmarkar-Karp's
      // bytes against 0.475, 14 more batches above 0.5).
      //
      // The first round, too, counts a crowd as far where it finds no far rank and the crowd is
      // above the limit by a hair (its mean excess at most 1/`first_hair` of the limit), in
      // batches under `more_crowds_from` packs: a first round without far ranks would otherwise
      // unlock nothing and end the re-deal, and the repair would fix the crowd one step each
      // (`captioning` 1,024 x 16 at eps 0, seed 1: 432 ranks above the limit by 0.02% of it on
      // average, 0.37 million units of work; counted as far, 0.02 million). With 1/256 it also
      // ran on `bimodal` and `vlm-pretrain` 4,096 x 4, moving up to 0.027 of Karmarkar-Karp's
      // bytes fewer, but on two `bimodal` 1,024 x 16 batches 0.018 more, one past half; with no
      // such test, `bimodal` searches that give up took up to 2.8 times their work first; in
      // larger batches, `bimodal` 1,024 x 256 at eps 0 (262,144 packs), whose time misses its
      // target, up to 1.23 times.
      //
      // And in those smaller batches the crowd rounds go on past t.unlock_rounds, as in large
      // ones, only while the crowd is above the limit by a finer hair (1/`later_hair` of it on
      // average): `vlm-pretrain` 1,024 x 16 at eps 0, seed 48, leaves 875 ranks above the limit
      // by 0.0045% of it after the last round, which the repair took 0.72 million units to fix,
      // and none after one more (0.04 million). On crowds above it by 0.02% or more (mostly
      // `high-res`, the heaviest images) the extra pins cost bytes: going on while the crowd is
      // above it by 1/first_hair, 11 of the benchmark workloads' batches at eps 0 went past half
      // of Karmarkar-Karp's bytes (`high-res` 1,024 x 16 seed 13: 0.542 instead of 0.498).
      const bool first =
          !large && round == 0 && far.empty() &&
          compare_products(excess_sum, first_hair, static_cast<std::int64_t>(over), st.limit) <= 0;
      const bool later =
          large || round < t.unlock_rounds ||
          compare_products(excess_sum, later_hair, static_cast<std::int64_t>(over), st.limit) <= 0;
      const bool crowd_falls =
          over < crowd_before ||
          (round >= t.unlock_rounds && excess_sum <= excess_before - excess_before / 8);
      const bool crowd_now =
          (round + 1 >= t.unlock_rounds || (round > 0 && far.empty()) || first) &&
          over >= crowd_size && crowd_falls && later;
      if (round >= t.unlock_rounds && !crowd_now) {
        break;
      }
      crowd_last = crowd_now;
      if (crowd_now) {
        crowd_before = over;
        excess_before = excess_sum;
        far.clear();
        for (std::size_t r = 0; r < st.dp; ++r) {
          if (st.limit - st.load[r] >= far_below || st.excess(r) > 0) {
            far.push_back(static_cast<std::int32_t>(r));
          }
        }
      } else if (large && over < crowd_size) {
        // A few ranks above the limit, none far, and no crowd: in large batches they unlock too
        // (see unlock_to_cover()).
        for (std::size_t r = 0; r < st.dp; ++r) {
          if (st.excess(r) > 0 && st.load[r] - st.limit < far_above) {
            far.push_back(static_cast<std::int32_t>(r));
          }
        }
      }
      fresh.clear();
      for (std::size_t f = 0; f < far.size(); ++f) {
        if (f + 2 < far.size()) {
          prefetch(&st.items[static_cast<std::size_t>(far[f + 2]) * st.k]);
        }
        if (f + 1 < far.size()) {
          const auto ahead = static_cast<std::size_t>(far[f + 1]);
          for (std::size_t i = 0; i < st.used[ahead]; ++i) {
            prefetch(&st.locked[static_cast<std::size_t>(st.items[ahead * st.k + i].pack)]);
          }
        }
        const auto r = static_cast<std::size_t>(far[f]);
        const bool low = st.limit - st.load[r] >= far_below;
        if (large && !low) {
          unlock_to_cover(st, r, lightest, heaviest, fresh);
          continue;
        }
        std::size_t pick = st.n;
        std::int64_t pick_swing = 0;
        std::int64_t pick_bytes = 0;
        for (std::size_t i = 0; i < st.used[r]; ++i) {
          const state::item& it = st.items[r * st.k + i]; // no pack record read
          const auto p = static_cast<std::size_t>(it.pack);
          const auto l = static_cast<std::size_t>(it.level);
          if (st.locked[p] == 0 || heaviest[l] < 0) {
            continue;
          }
          const std::int64_t swing = low ? heaviest[l] - it.cost : it.cost - lightest[l];
          if (swing <= 0) {
            continue;
          }
          // Leverage swing / (bytes + 1), compared exactly.
          if (pick == st.n ||
              compare_products(swing, pick_bytes + 1, pick_swing, it.bytes + 1) > 0) {
            pick = p;
            pick_swing = swing;
            pick_bytes = it.bytes;
          }
        }
        if (pick < st.n) {
          st.locked[pick] = 0;
          fresh.push_back(static_cast<std::int32_t>(pick));
        }
      }
      if (fresh.empty()) {
        return;
      }
      add_unlocked(st, fresh);
    }
  }

  // A rank above the limit in a large batch unlocks, by leverage (swing per byte, the pick's
  // measure) descending and then in item order, as many of its pins as it takes for their
  // swings, down to the lightest unlocked pack of each one's level, to add up to its excess:
  // one pin a round moves a rank that needs a dozen levels lighter a dozen rounds later, or
  // never. With the few ranks above the limit that redeal_rounds() adds in large batches, this
  // helps where the limit is set by a few heavy ranks and the others keep much room, so that
  // the ranks just above it are not far: `pareto` at dp 1,024 x ga 256, eps 0 (262,144 packs),
  // has 7 ranks above the limit by 6.65 million us in all against a mean room of 530 million;
  // with one pin each, and only when far, none unlocks, and the repair spends 4.0 and 6.4
  // million units of work (seeds 1 and 2; the first stops at the bound); covering, 0.78 and
  // 0.77 million, moving 0.32 and 0.34 of Karmarkar-Karp's bytes against 0.27 and 0.29. At eps
  // 0.01, `bimodal` at 262,144 and 1,048,576 packs: 1.4-1.9 and 5.5-6.4 million units of work
  // against 0.46-0.47 and 1.8 million.
  // In smaller batches, where that work costs milliseconds, the extra pins moved up to 0.2 of
  // Karmarkar-Karp's bytes more (`pareto` at dp 2 x ga 1,024: 0.26 -> 0.46), so a rank there
  // unlocks one pin a round. O(k) per pin for the first selected_first pins, then O(k log k).
  void unlock_to_cover(state& st, std::size_t r, const std::vector<std::int64_t>& lightest,
                       const std::vector<std::int64_t>& heaviest,
                       std::vector<std::int32_t>& fresh) {
    auto& c = cover_;
    c.clear();
    for (std::size_t i = 0; i < st.used[r]; ++i) {
      const state::item& it = st.items[r * st.k + i];
      const auto p = static_cast<std::size_t>(it.pack);
      // Unlocked packs are passed over (a third of a crowd rank's items at dp 1,024 x ga 256);
      // a pin's place is current, so its level, cost and bytes are those beside it: no pack
      // record is read.
      if (st.locked[p] == 0) {
        continue;
      }
      const auto l = static_cast<std::size_t>(it.level);
      if (heaviest[l] < 0) {
        continue;
      }
      const std::int64_t swing = it.cost - lightest[l];
      if (swing > 0) {
        c.push_back(
            {swing, it.bytes + 1, static_cast<std::int32_t>(p), static_cast<std::int32_t>(i)});
      }
    }
    const auto before = [](const pin_swing& a, const pin_swing& b) {
      const int by_leverage = compare_products(a.swing, b.bytes_1, b.swing, a.bytes_1);
      return by_leverage != 0 ? by_leverage > 0 : a.item < b.item;
    };
    // In that order: the first few by selection, O(k) each (a rank just above the limit mostly
    // needs one, and sorting the k candidates of each of a crowd of such ranks cost `vlm-pretrain`
    // 1,024 x 256 at eps 0 half its solve time again), the rest, where needed, by a sort.
    const std::int64_t excess = st.excess(r);
    std::int64_t covered = 0;
    for (std::size_t taken = 0; taken < c.size() && covered < excess; ++taken) {
      if (taken == selected_first) {
        std::sort(c.begin() + static_cast<std::ptrdiff_t>(taken), c.end(), before);
      } else if (taken < selected_first) {
        std::size_t best = taken;
        for (std::size_t j = taken + 1; j < c.size(); ++j) {
          best = before(c[j], c[best]) ? j : best;
        }
        std::swap(c[taken], c[best]);
      }
      covered += c[taken].swing;
      st.locked[static_cast<std::size_t>(c[taken].pack)] = 0;
      fresh.push_back(c[taken].pack);
    }
  }

  // The unlocked packs of every level, by cost descending, ties by id (the level's stretch of the
  // cost index walked from the top): level l is unlocked_[unlocked_start_[l] ..
  // unlocked_start_[l + 1] - 1]. Levels rise with ids, so the whole list runs by id. Beside each,
  // its cost and the place it holds ((rank << 32) | item): all that the re-deal sweeps read and
  // write, until `store_unlocked()`.
  void collect_unlocked(const state& st) {
    unlocked_.resize(st.n);
    unlocked_start_.assign(st.k + 1, 0);
    std::size_t m = 0;
    for (std::size_t l = 0; l < st.k; ++l) {
      unlocked_start_[l] = m;
      for (std::size_t i = st.level_end[l]; i-- > st.level_begin[l];) {
        unlocked_[m] = st.by_cost(i); // kept only if unlocked: no branch to mispredict
        m += st.locked[static_cast<std::size_t>(st.by_cost(i))] == 0 ? 1 : 0;
      }
    }
    unlocked_start_[st.k] = m;
    unlocked_.resize(m);
    unlocked_cost_.resize(m);
    unlocked_place_.resize(m);
    for (std::size_t u = 0; u < m; ++u) {
      const auto& k = st.pk[static_cast<std::size_t>(unlocked_[u])];
      unlocked_cost_[u] = k.cost;
      unlocked_place_[u] = place_word(k.rank, k.slot);
    }
  }

  // Merges the packs in `fresh` (just unlocked: their records are current) into the list, which
  // stays in id order.
  void add_unlocked(const state& st, std::vector<std::int32_t>& fresh) {
    std::sort(fresh.begin(), fresh.end());
    // Level l's stretch starts later by the fresh packs of lower levels: counted per level, then
    // summed upward.
    auto& at_level = fresh_at_level_;
    at_level.assign(st.k, 0);
    for (const auto p : fresh) {
      ++at_level[static_cast<std::size_t>(st.pk[static_cast<std::size_t>(p)].level)];
    }
    std::size_t below = 0;
    for (std::size_t l = 1; l <= st.k; ++l) {
      below += at_level[l - 1];
      unlocked_start_[l] += below;
    }
    std::size_t a = unlocked_.size();
    std::size_t b = fresh.size();
    std::size_t out = a + b;
    unlocked_.resize(out);
    unlocked_cost_.resize(out);
    unlocked_place_.resize(out);
    while (b > 0) {
      --out;
      if (a > 0 && unlocked_[a - 1] > fresh[b - 1]) {
        --a;
        unlocked_[out] = unlocked_[a];
        unlocked_cost_[out] = unlocked_cost_[a];
        unlocked_place_[out] = unlocked_place_[a];
      } else {
        --b;
        const auto& k = st.pk[static_cast<std::size_t>(fresh[b])];
        unlocked_[out] = fresh[b];
        unlocked_cost_[out] = k.cost;
        unlocked_place_[out] = place_word(k.rank, k.slot);
      }
    }
  }

  static std::uint64_t place_word(std::int32_t rank, std::int32_t item) {
    return (static_cast<std::uint64_t>(rank) << 32) | static_cast<std::uint32_t>(item);
  }

  // The places of the unlocked packs into their records and the items.
  void store_unlocked(state& st) {
    for (std::size_t u = 0; u < unlocked_.size(); ++u) {
      const auto p = static_cast<std::size_t>(unlocked_[u]);
      const auto rank = static_cast<std::int32_t>(unlocked_place_[u] >> 32);
      const auto slot = static_cast<std::int32_t>(unlocked_place_[u] & 0xffffffffu);
      st.pk[p].rank = rank;
      st.pk[p].slot = slot;
      const std::size_t at = static_cast<std::size_t>(rank) * st.k + static_cast<std::size_t>(slot);
      st.items[at] = st.item_of(p); // of the level of the pack whose place it takes
    }
  }

  // (2b) Re-deals the unlocked packs of one level at a time: they leave their ranks and come
  // back heaviest to the rank that is lightest without them. Pairing sorted against reverse-sorted
  // minimises the largest sum (and maximises the smallest), so no sweep raises B; every rank
  // gets back as many packs of that level as it gave, so levels stay valid. Each pack takes over
  // the place of the pack whose place it gets, so the pass is one sort and one linear walk per
  // level, over the level's stretch of the unlocked arrays. Returns whether any pack changed
  // rank.
  bool redeal(state& st) {
    bool changed = false;
    auto& from = redeal_from_;
    auto& moved = redeal_moved_;
    for (std::size_t l = 0; l < st.k; ++l) {
      const std::size_t base = unlocked_start_[l];
      const std::size_t m = unlocked_start_[l + 1] - base;
      if (m < 2) {
        continue;
      }
      const std::int64_t* cost = unlocked_cost_.data() + base;
      std::uint64_t* place = unlocked_place_.data() + base;
      // Place i (held by pack i) is keyed by its rank's load without pack i, ties by i; the
      // places sorted, the j-th goes to the j-th heaviest pack, pack j: from[j] is that place.
      sort_places(st, cost, place, m);
      moved.resize(m);
      for (std::size_t j = 0; j < m; ++j) {
        const auto f = static_cast<std::size_t>(from[j]);
        const auto rank = static_cast<std::size_t>(place[f] >> 32);
        changed |= place[j] >> 32 != rank;
        st.load[rank] += cost[j] - cost[f];
        moved[j] = place[f];
      }
      std::copy(moved.begin(), moved.begin() + static_cast<std::ptrdiff_t>(m), place);
    }
    return changed;
  }

  // Writes into redeal_from_[0..m) the places 0..m-1 by (load of the place's rank without its
  // pack, place) ascending.
  void sort_places(const state& st, const std::int64_t* cost, const std::uint64_t* place,
                   std::size_t m) {
    auto& keys = redeal_keys_;
    keys.resize(m);
    for (std::size_t i = 0; i < m; ++i) {
      keys[i] = st.load[static_cast<std::size_t>(place[i] >> 32)] - cost[i]; // >= 0
    }
    order_asc(keys, redeal_from_, redeal_sort_);
  }

  static constexpr std::size_t more_crowds_from = 65536; // packs; see redeal_rounds()
  static constexpr std::int64_t first_hair = 1024;       // see redeal_rounds()
  static constexpr std::int64_t later_hair = 8192;       // see redeal_rounds()
  static constexpr std::size_t selected_first = 8;       // see unlock_to_cover()

  std::vector<std::int32_t> unlocked_; // see collect_unlocked()
  std::vector<std::size_t> unlocked_start_;
  std::vector<std::int64_t> unlocked_cost_;   // beside unlocked_: their costs
  std::vector<std::uint64_t> unlocked_place_; // and places, see collect_unlocked()
  std::vector<std::int64_t> redeal_keys_;     // see sort_places()
  std::vector<std::int32_t> redeal_from_;
  order_scratch redeal_sort_;
  std::vector<std::uint64_t> redeal_moved_;
  std::vector<std::int32_t> fresh_unlocked_; // see redeal_rounds()
  std::vector<std::size_t> fresh_at_level_;  // see add_unlocked()
  std::vector<std::int32_t> far_ranks_;      // see redeal_rounds()
  struct pin_swing {
    std::int64_t swing;
    std::int64_t bytes_1; // its bytes + 1
    std::int32_t pack;
    std::int32_t item;
  };
  std::vector<pin_swing> cover_; // see unlock_to_cover()
};

} // namespace packswap::detail::stage2
