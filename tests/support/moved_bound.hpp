#pragma once

// A lower bound on the bytes any assignment with A = LB_A moves (mbs = 1), read against the
// solver's moved bytes by the stress benchmark (bench/refine/stress.cpp) and checked against
// exhaustive search by the tests (tests/refine/test_moved_bound.cpp).
//
// The model. With the micro-step caps cap_0 >= cap_1 >= ... (the sorted chunks' maxima, cap_j
// the cost at sorted position j dp) and level(p) the last j with cap_j >= cost(p), an assignment
// keeps A = LB_A only if every rank's i-th largest pack costs at most cap_i: a pack of level l
// sits in one of a rank's slots 0 .. l, and every one of the dp x ga slots holds one pack. So a
// rank holds at most j + 1 packs of level <= j (the constraint stage 2 keeps), and, counting
// the slots 0 .. j of all ranks (dp (j + 1) of them): they hold every pack of level <= j
// (total_j of them) and, on each rank r, at least kept_r((j, j']) - (j' - j) of the packs r keeps
// home with a level in (j, j'], which need slots <= j' and find only j' - j above j. With
// slack_j = dp (j + 1) - total_j:
//
//   (prefix)  kept_r(levels <= j) <= j + 1                   for every rank r and level j
//   (level)   sum over ranks r of (kept_r(level l) - 1)^+ <= slack_{l - 1}   for every l >= 1,
//             and kept_r(level 0) <= 1
//
// (the second from j' = j + 1 = l). Both are necessary; the bound keeps each family on its own,
// where a greedy by bytes is exact: (prefix) with (level) relaxed to kept_r(level l) <= 1 +
// slack_{l - 1} is a laminar matroid on each rank's own packs, and (level) alone is, per level,
// the union of a partition matroid (one pack per rank) and a uniform one (slack_{l - 1} more).
// Each gives an upper bound on the bytes that stay home; the smaller one, taken from the total,
// bounds the moved bytes from below. The limit on B is ignored, so the bound is not tight in
// general; with distinct costs and dp = 2 (no slack: each rank holds one pack of every level) it
// is exact. O(n log n). With two ranks the bound below is the exact fewest instead, ties and all
// (moved_two_ranks_exact).

#include <packswap/batch.hpp>
#include <packswap/refine/detail/stage2/pin.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace packswap::test {

/// The micro-step caps of an assignment with A = LB_A: the sorted chunks' maxima, cap j the cost
/// at sorted position j dp (mbs = 1).
inline std::vector<std::int64_t> chunk_caps(const std::vector<pack_meta>& packs, const shape& s) {
  const auto dp = static_cast<std::size_t>(s.dp);
  std::vector<std::int64_t> sorted(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    sorted[p] = packs[p].cost;
  }
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  std::vector<std::int64_t> caps(static_cast<std::size_t>(s.ga));
  for (std::size_t j = 0; j < caps.size(); ++j) {
    caps[j] = sorted[j * dp];
  }
  return caps;
}

/// With two ranks, the fewest bytes any assignment with A = LB_A moves, exactly (the limit on B
/// ignored). Sorted by cost, the packs form runs of equal cost; rank 0's i-th largest pack is at
/// or below cap i exactly where, after every run ending at sorted position e, rank 0 holds
/// floor(e / 2) or ceil(e / 2) of the packs so far (and so does rank 1): rank 0 holding c of
/// them, its c-th largest costs the run's cost, at most cap c - 1 = the cost at position
/// 2 (c - 1) only if 2 (c - 1) < e. Within a run the packs are interchangeable, so with t of
/// them on rank 0 the fewest moved are those of the rank with more than its share, the smallest
/// first. A walk along the runs with two states (floor or ceil) finds the fewest in O(n log n).
inline std::int64_t moved_two_ranks_exact(const std::vector<pack_meta>& packs) {
  const auto n = packs.size();
  std::vector<std::size_t> sorted(n);
  for (std::size_t p = 0; p < n; ++p) {
    sorted[p] = p;
  }
  std::sort(sorted.begin(), sorted.end(),
            [&](std::size_t a, std::size_t b) { return packs[a].cost > packs[b].cost; });
  constexpr std::int64_t none = -1;
  // fewest[h]: the fewest bytes so far with rank 0 holding floor(e / 2) + h of the first e.
  std::int64_t fewest[2] = {0, none};
  for (std::size_t start = 0; start < n;) {
    std::size_t end = start;
    std::vector<std::int64_t> own[2]; // the run's bytes by home rank, ascending
    while (end < n && packs[sorted[end]].cost == packs[sorted[start]].cost) {
      own[packs[sorted[end]].source_rank == 0 ? 0 : 1].push_back(packs[sorted[end]].bytes);
      ++end;
    }
    for (auto& o : own) {
      std::sort(o.begin(), o.end());
    }
    // Bytes moved when rank 0 takes t of the run: the smallest of the surplus rank's own.
    const auto moved = [&](std::int64_t t) {
      const auto h0 = static_cast<std::int64_t>(own[0].size());
      const auto& surplus = t < h0 ? own[0] : own[1];
      const auto count = static_cast<std::size_t>(t < h0 ? h0 - t : t - h0);
      std::int64_t sum = 0;
      for (std::size_t i = 0; i < count; ++i) {
        sum += surplus[i];
      }
      return sum;
    };
    std::int64_t next[2] = {none, none};
    for (std::int64_t h = 0; h < (end % 2 == 1 ? 2 : 1); ++h) {
      for (std::int64_t before = 0; before < 2; ++before) {
        if (fewest[before] == none) {
          continue;
        }
        const std::int64_t t = static_cast<std::int64_t>(end / 2 + static_cast<std::size_t>(h)) -
                               static_cast<std::int64_t>(start / 2) - before;
        const std::int64_t c = fewest[before] + moved(t);
        if (next[h] == none || c < next[h]) {
          next[h] = c;
        }
      }
    }
    fewest[0] = next[0];
    fewest[1] = next[1];
    start = end;
  }
  return fewest[0];
}

/// Lower bound on the bytes moved by any assignment of `packs` in shape `s` (mbs = 1) whose A is
/// LB_A (see the comment above); with two ranks, the fewest exactly (moved_two_ranks_exact).
/// Unweighted bytes: one node.
inline std::int64_t moved_lower_bound(const std::vector<pack_meta>& packs, const shape& s) {
  if (s.dp == 2) {
    return moved_two_ranks_exact(packs);
  }
  const auto n = packs.size();
  const auto dp = static_cast<std::size_t>(s.dp);
  const auto k = static_cast<std::size_t>(s.ga);
  const auto caps = chunk_caps(packs, s);
  std::vector<std::size_t> level(n);
  std::vector<std::int64_t> slack(k, 0); // dp (j + 1) - total_j
  std::int64_t total_bytes = 0;
  {
    std::vector<std::int64_t> per_level(k, 0);
    for (std::size_t p = 0; p < n; ++p) {
      // The last j with caps[j] >= cost (caps are non-increasing).
      level[p] = static_cast<std::size_t>(
          std::upper_bound(caps.begin(), caps.end(), packs[p].cost, std::greater<>()) -
          caps.begin() - 1);
      ++per_level[level[p]];
      total_bytes += packs[p].bytes;
    }
    std::int64_t prefix = 0;
    for (std::size_t j = 0; j < k; ++j) {
      prefix += per_level[j];
      slack[j] = static_cast<std::int64_t>(dp * (j + 1)) - prefix;
    }
  }
  // Packs kept home on a level beyond one per rank: at most slack_{l - 1} (none at level 0).
  const auto extra_allowed = [&](std::size_t l) { return l == 0 ? 0 : slack[l - 1]; };
  const auto by_bytes = [&](std::size_t a, std::size_t b) {
    return packs[a].bytes > packs[b].bytes || (packs[a].bytes == packs[b].bytes && a < b);
  };

  // (prefix), with (level) per rank: each rank's own packs, bytes descending.
  std::int64_t kept_prefix = 0;
  {
    std::vector<std::vector<std::size_t>> own(dp);
    for (std::size_t p = 0; p < n; ++p) {
      own[static_cast<std::size_t>(packs[p].source_rank)].push_back(p);
    }
    std::vector<std::int64_t> room(k);
    std::vector<std::int64_t> on_level(k);
    detail::stage2::min_add_tree<std::int64_t> tree;
    for (auto& mine : own) {
      std::sort(mine.begin(), mine.end(), by_bytes);
      for (std::size_t j = 0; j < k; ++j) {
        room[j] = static_cast<std::int64_t>(j) + 1; // j + 1 - (kept packs of level <= j)
        on_level[j] = 0;
      }
      tree.assign(room.data(), k);
      for (const auto p : mine) {
        const std::size_t l = level[p];
        if (tree.min(l, k) >= 1 && on_level[l] < 1 + extra_allowed(l)) {
          tree.add(l, k, -1);
          ++on_level[l];
          kept_prefix += packs[p].bytes;
        }
      }
    }
  }

  // (level) alone: each level's packs, bytes descending; one per rank, then slack_{l - 1} more.
  std::int64_t kept_level = 0;
  {
    std::vector<std::size_t> all(n);
    for (std::size_t p = 0; p < n; ++p) {
      all[p] = p;
    }
    std::sort(all.begin(), all.end(), [&](std::size_t a, std::size_t b) {
      return level[a] < level[b] || (level[a] == level[b] && by_bytes(a, b));
    });
    std::vector<std::size_t> seen_at(dp, k); // the level a rank last kept a pack of (k: none)
    std::int64_t extras = 0;
    std::size_t current = k;
    for (const auto p : all) {
      const std::size_t l = level[p];
      if (l != current) {
        current = l;
        extras = 0;
      }
      const auto r = static_cast<std::size_t>(packs[p].source_rank);
      if (seen_at[r] != l) {
        seen_at[r] = l;
        kept_level += packs[p].bytes;
      } else if (extras < extra_allowed(l)) {
        ++extras;
        kept_level += packs[p].bytes;
      }
    }
  }
  return total_bytes - std::min(kept_prefix, kept_level);
}

} // namespace packswap::test
