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
// (moved_two_ranks_exact), and moved_two_ranks_within gives the exact fewest within a limit on B
// where its table is small enough.

#include <packswap/batch.hpp>
#include <packswap/refine/detail/stage2/min_add_tree.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
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

/// Each pack's level: the last j with caps[j] >= its cost (caps are non-increasing, and caps[0]
/// bounds every cost).
inline std::vector<std::size_t> pack_levels(const std::vector<pack_meta>& packs,
                                            const std::vector<std::int64_t>& caps) {
  std::vector<std::size_t> level(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    level[p] = static_cast<std::size_t>(
        std::upper_bound(caps.begin(), caps.end(), packs[p].cost, std::greater<>()) - caps.begin() -
        1);
  }
  return level;
}

namespace bound_detail {

// A run of equal cost among the packs sorted by cost, descending: it ends at sorted position
// `end`, and `own[h][i]` is the sum of the i smallest bytes of its packs whose home is rank h.
struct cost_run {
  std::int64_t cost = 0;
  std::size_t start = 0, end = 0;
  std::vector<std::int64_t> own[2];

  // The fewest bytes the run moves when rank 0 takes t of its packs (0 <= t <= end - start):
  // those of the rank holding more than its share, the smallest first.
  [[nodiscard]] std::int64_t moved(std::int64_t t) const {
    const auto h0 = static_cast<std::int64_t>(own[0].size()) - 1;
    return t < h0 ? own[0][static_cast<std::size_t>(h0 - t)]
                  : own[1][static_cast<std::size_t>(t - h0)];
  }
};

// The runs of equal cost of a batch of two ranks.
inline std::vector<cost_run> cost_runs(const std::vector<pack_meta>& packs) {
  const auto n = packs.size();
  std::vector<std::size_t> sorted(n);
  for (std::size_t p = 0; p < n; ++p) {
    sorted[p] = p;
  }
  std::sort(sorted.begin(), sorted.end(),
            [&](std::size_t a, std::size_t b) { return packs[a].cost > packs[b].cost; });
  std::vector<cost_run> runs;
  for (std::size_t start = 0; start < n;) {
    cost_run r;
    r.cost = packs[sorted[start]].cost;
    r.start = start;
    std::size_t end = start;
    std::vector<std::int64_t> bytes[2]; // by home rank
    while (end < n && packs[sorted[end]].cost == r.cost) {
      bytes[packs[sorted[end]].source_rank == 0 ? 0 : 1].push_back(packs[sorted[end]].bytes);
      ++end;
    }
    r.end = end;
    for (int h = 0; h < 2; ++h) {
      std::sort(bytes[h].begin(), bytes[h].end());
      r.own[h].assign(1, 0);
      for (const auto b : bytes[h]) {
        r.own[h].push_back(r.own[h].back() + b);
      }
    }
    runs.push_back(std::move(r));
    start = end;
  }
  return runs;
}

// Rank 0's packs of a run when it holds floor(e / 2) + h of the first e packs after the run and
// floor(s / 2) + before of the first s before it.
inline std::int64_t taken(const cost_run& r, std::int64_t h, std::int64_t before) {
  return static_cast<std::int64_t>(r.end / 2) - static_cast<std::int64_t>(r.start / 2) + h - before;
}

} // namespace bound_detail

/// With two ranks, the fewest bytes any assignment with A = LB_A moves, exactly (the limit on B
/// ignored). Sorted by cost, the packs form runs of equal cost; rank 0's i-th largest pack is at
/// or below cap i exactly where, after every run ending at sorted position e, rank 0 holds
/// floor(e / 2) or ceil(e / 2) of the packs so far (and so does rank 1): rank 0 holding c of
/// them, its c-th largest costs the run's cost, at most cap c - 1 = the cost at position
/// 2 (c - 1) only if 2 (c - 1) < e. Within a run the packs are interchangeable, so with t of
/// them on rank 0 the fewest moved are those of the rank with more than its share, the smallest
/// first. A walk along the runs with two states (floor or ceil) finds the fewest in O(n log n).
inline std::int64_t moved_two_ranks_exact(const std::vector<pack_meta>& packs) {
  constexpr std::int64_t none = -1;
  // fewest[h]: the fewest bytes so far with rank 0 holding floor(e / 2) + h of the first e.
  std::int64_t fewest[2] = {0, none};
  for (const auto& r : bound_detail::cost_runs(packs)) {
    std::int64_t next[2] = {none, none};
    for (std::int64_t h = 0; h < (r.end % 2 == 1 ? 2 : 1); ++h) {
      for (std::int64_t before = 0; before < 2; ++before) {
        if (fewest[before] == none) {
          continue;
        }
        const std::int64_t c = fewest[before] + r.moved(bound_detail::taken(r, h, before));
        if (next[h] == none || c < next[h]) {
          next[h] = c;
        }
      }
    }
    fewest[0] = next[0];
    fewest[1] = next[1];
  }
  return fewest[0];
}

/// With two ranks, the fewest bytes any assignment with A = LB_A and both ranks' loads at most
/// `limit` moves, exactly; none where no such assignment exists or the table below would hold
/// more than `most_cells` entries.
///
/// The walk of moved_two_ranks_exact, with rank 0's load as a second coordinate. In units of g,
/// the greatest common divisor of the costs, rank 0's load after run k is a base (rank 0 holding
/// floor(e / 2) after every run) plus dev_k, where dev moves by c_k (h_k - h_{k-1}) at run k (h:
/// the state, 0 for floor and 1 for ceil). After run k the rest can change dev by -c_{k+1} h_k
/// plus a sum of cost gaps in [0, c_{k+1}], so only dev_k within c_{k+1} of the window the limit
/// leaves the final load can reach it: the table for run k spans the window's width plus c_{k+1},
/// and the whole table about (total cost / g) / (packs per run) + runs x the window's width
/// entries. For the tests and the stress benchmark, which read the solver's bytes against it at
/// dp 2; it is not the solver's (their figures differ where the solver misses the fewest).
inline std::optional<std::int64_t> moved_two_ranks_within(const std::vector<pack_meta>& packs,
                                                          std::int64_t limit,
                                                          std::int64_t most_cells) {
  const auto runs = bound_detail::cost_runs(packs);
  std::int64_t g = 0;
  std::int64_t total = 0;
  std::int64_t base = 0;
  for (const auto& r : runs) {
    g = std::gcd(g, r.cost);
    total += r.cost * static_cast<std::int64_t>(r.end - r.start);
    base += r.cost * bound_detail::taken(r, 0, 0);
  }
  if (g == 0) {
    g = 1; // every cost 0
  }
  // The window of the final dev: base + dev g <= limit and total - base - dev g <= limit.
  const auto floor_div = [](std::int64_t a, std::int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
  };
  const std::int64_t lo = std::max<std::int64_t>(0, -floor_div(base - total + limit, g));
  // dev is at most the dearest cost (each state 1 adds the gap after its run).
  const std::int64_t hi =
      std::min(floor_div(limit - base, g), runs.empty() ? 0 : runs.front().cost / g);
  if (lo > hi) {
    return std::nullopt;
  }
  // dev_k's span for state h: [lo - c_{k+1} (1 - h), hi + c_{k+1} h], from 0.
  const auto next_cost = [&](std::size_t k) {
    return k + 1 < runs.size() ? runs[k + 1].cost / g : 0;
  };
  std::int64_t cells = 0;
  std::int64_t widest = 1;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const std::int64_t width = hi - lo + 1 + next_cost(k);
    widest = std::max(widest, width);
    cells += 2 * width;
    if (cells > most_cells) {
      return std::nullopt;
    }
  }
  constexpr std::int64_t none = std::numeric_limits<std::int64_t>::max() / 2;
  // Per state: the span's first dev, its last, and the fewest bytes for each dev in between.
  struct row {
    std::int64_t first = 0, last = -1;
    std::vector<std::int64_t> fewest;
  };
  std::array<row, 2> now;
  std::array<row, 2> next;
  for (auto* rows : {&now, &next}) {
    for (auto& r : *rows) {
      r.fewest.resize(static_cast<std::size_t>(widest));
    }
  }
  now[0].first = now[0].last = 0; // before the first run: dev 0, state 0
  now[0].fewest[0] = 0;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const auto& run = runs[k];
    const std::int64_t c = run.cost / g;
    const std::int64_t after = next_cost(k);
    for (std::int64_t h = 0; h < 2; ++h) {
      auto& to = next[static_cast<std::size_t>(h)];
      to.first = std::max<std::int64_t>(0, lo - after * (1 - h));
      to.last = h == 1 && run.end % 2 == 0 ? -1 : hi + after * h; // ceil only after odd e
      if (to.last < to.first) {
        continue;
      }
      std::fill(to.fewest.begin(), to.fewest.begin() + (to.last - to.first + 1), none);
      for (std::int64_t before = 0; before < 2; ++before) {
        const auto& from = now[static_cast<std::size_t>(before)];
        const std::int64_t t = bound_detail::taken(run, h, before);
        if (from.last < from.first || t < 0 || t > static_cast<std::int64_t>(run.end - run.start)) {
          continue;
        }
        const std::int64_t moved = run.moved(t);
        const std::int64_t shift = c * (h - before);
        const std::int64_t first = std::max(to.first, from.first + shift);
        const std::int64_t last = std::min(to.last, from.last + shift);
        const std::int64_t* in = from.fewest.data() + (first - shift - from.first);
        std::int64_t* out = to.fewest.data() + (first - to.first);
        for (std::int64_t d = 0; d <= last - first; ++d) {
          out[d] = std::min(out[d], in[d] + moved);
        }
      }
    }
    std::swap(now, next);
  }
  std::int64_t best = none;
  for (std::int64_t d = std::max(lo, now[0].first); d <= std::min(hi, now[0].last); ++d) {
    best = std::min(best, now[0].fewest[static_cast<std::size_t>(d - now[0].first)]);
  }
  if (best == none) {
    return std::nullopt;
  }
  return best;
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
  const auto level = pack_levels(packs, caps);
  std::vector<std::int64_t> slack(k, 0); // dp (j + 1) - total_j
  std::int64_t total_bytes = 0;
  {
    std::vector<std::int64_t> per_level(k, 0);
    for (std::size_t p = 0; p < n; ++p) {
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
