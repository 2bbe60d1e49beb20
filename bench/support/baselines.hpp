#pragma once

// The public methods packswap is compared against, written here in bench code (not part of the
// library) from their published descriptions. Each returns a pack -> (rank, micro-step)
// assignment for one global batch.

#include <packswap/batch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <queue>
#include <string>
#include <vector>

namespace packswap::bench {

namespace detail {

// Pack ids by cost descending, ties by id.
inline std::vector<std::int32_t> by_cost(const std::vector<pack_meta>& packs) {
  std::vector<std::int32_t> ids(packs.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
    return packs[static_cast<std::size_t>(a)].cost > packs[static_cast<std::size_t>(b)].cost;
  });
  return ids;
}

// Given each pack's rank, fills micro-steps with each rank's packs, heaviest first.
inline assignment heavy_first_steps(const std::vector<pack_meta>& packs, const shape& s,
                                    const std::vector<std::int32_t>& rank_of) {
  assignment a(packs.size());
  std::vector<std::int32_t> fill(static_cast<std::size_t>(s.dp), 0);
  for (const auto p : by_cost(packs)) {
    const auto r = rank_of[static_cast<std::size_t>(p)];
    a[static_cast<std::size_t>(p)] = {r, fill[static_cast<std::size_t>(r)]++ / s.mbs};
  }
  return a;
}

} // namespace detail

/// No rebalancing: every rank computes what its loader produced, in loader order.
inline assignment identity(const std::vector<pack_meta>& packs, const shape& s) {
  assignment a(packs.size());
  std::vector<std::int32_t> fill(static_cast<std::size_t>(s.dp), 0);
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const auto r = packs[p].source_rank;
    a[p] = {r, fill[static_cast<std::size_t>(r)]++ / s.mbs};
  }
  return a;
}

/// Sorted round-robin (TensorRT-LLM style): packs by cost descending dealt to ranks 0, 1, ...
inline assignment sorted_round_robin(const std::vector<pack_meta>& packs, const shape& s) {
  std::vector<std::int32_t> rank_of(packs.size());
  const auto order = detail::by_cost(packs);
  for (std::size_t i = 0; i < order.size(); ++i) {
    rank_of[static_cast<std::size_t>(order[i])] =
        static_cast<std::int32_t>(i % static_cast<std::size_t>(s.dp));
  }
  return detail::heavy_first_steps(packs, s, rank_of);
}

/// Snake (ERNIE style): packs by cost descending dealt 0..dp-1, then dp-1..0, and so on.
inline assignment snake(const std::vector<pack_meta>& packs, const shape& s) {
  std::vector<std::int32_t> rank_of(packs.size());
  const auto order = detail::by_cost(packs);
  const auto dp = static_cast<std::size_t>(s.dp);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t j = i % dp;
    rank_of[static_cast<std::size_t>(order[i])] =
        static_cast<std::int32_t>((i / dp) % 2 == 0 ? j : dp - 1 - j);
  }
  return detail::heavy_first_steps(packs, s, rank_of);
}

/// Equal-cardinality LPT per micro-step (Megatron Bridge / VeOmni style): micro-step m takes the
/// m-th loader batch of every rank, and its packs, heaviest first, go to the least-loaded rank
/// that still has room for them.
inline assignment lpt_per_micro_step(const std::vector<pack_meta>& packs, const shape& s) {
  assignment a(packs.size());
  const auto dp = static_cast<std::size_t>(s.dp);
  std::vector<std::vector<std::int32_t>> step_packs(static_cast<std::size_t>(s.ga));
  std::vector<std::int32_t> fill(dp, 0);
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const auto r = static_cast<std::size_t>(packs[p].source_rank);
    step_packs[static_cast<std::size_t>(fill[r]++ / s.mbs)].push_back(static_cast<std::int32_t>(p));
  }
  for (std::size_t m = 0; m < step_packs.size(); ++m) {
    auto& ids = step_packs[m];
    std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t x, std::int32_t y) {
      return packs[static_cast<std::size_t>(x)].cost > packs[static_cast<std::size_t>(y)].cost;
    });
    using entry = std::pair<std::int64_t, std::int32_t>; // (load, rank), smallest first
    std::priority_queue<entry, std::vector<entry>, std::greater<>> ranks;
    std::vector<std::int32_t> taken(dp, 0);
    for (std::size_t r = 0; r < dp; ++r) {
      ranks.emplace(0, static_cast<std::int32_t>(r));
    }
    for (const auto p : ids) {
      const auto [load, r] = ranks.top();
      ranks.pop();
      a[static_cast<std::size_t>(p)] = {r, static_cast<std::int32_t>(m)};
      if (++taken[static_cast<std::size_t>(r)] < s.mbs) {
        ranks.emplace(load + packs[static_cast<std::size_t>(p)].cost, r);
      }
    }
  }
  return a;
}

/// Equal-size Karmarkar–Karp per step (verl style): largest differencing over sorted chunks of
/// dp packs gives each rank a set; set i goes to rank i; heaviest first within a rank.
inline assignment karmarkar_karp_per_step(const std::vector<pack_meta>& packs, const shape& s) {
  const auto order = detail::by_cost(packs);
  const auto k = static_cast<std::size_t>(s.dp);
  struct state {
    std::vector<std::int64_t> sum;
    std::vector<std::vector<std::int32_t>> items;
  };
  std::vector<state> states;
  for (std::size_t c = 0; c < order.size() / k; ++c) {
    state st;
    for (std::size_t i = 0; i < k; ++i) {
      const auto p = order[c * k + i];
      st.sum.push_back(packs[static_cast<std::size_t>(p)].cost);
      st.items.push_back({p});
    }
    states.push_back(std::move(st));
  }
  using entry = std::pair<std::int64_t, std::int64_t>; // (spread, -state)
  std::priority_queue<entry> heap;
  for (std::size_t i = 0; i < states.size(); ++i) {
    heap.emplace(states[i].sum.front() - states[i].sum.back(), -static_cast<std::int64_t>(i));
  }
  while (heap.size() > 1) {
    const auto xi = static_cast<std::size_t>(-heap.top().second);
    auto& x = states[xi];
    heap.pop();
    auto& y = states[static_cast<std::size_t>(-heap.top().second)];
    heap.pop();
    std::vector<std::size_t> idx(k);
    std::vector<std::int64_t> sum(k);
    std::vector<std::vector<std::int32_t>> items(k);
    for (std::size_t i = 0; i < k; ++i) {
      sum[i] = x.sum[i] + y.sum[k - 1 - i];
      items[i] = std::move(x.items[i]);
      items[i].insert(items[i].end(), y.items[k - 1 - i].begin(), y.items[k - 1 - i].end());
      idx[i] = i;
    }
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::size_t a, std::size_t b) { return sum[a] > sum[b]; });
    for (std::size_t i = 0; i < k; ++i) {
      x.sum[i] = sum[idx[i]];
      x.items[i] = std::move(items[idx[i]]);
    }
    heap.emplace(x.sum.front() - x.sum.back(), -static_cast<std::int64_t>(xi));
  }
  std::vector<std::int32_t> rank_of(packs.size());
  const auto& final_state = states[static_cast<std::size_t>(-heap.top().second)];
  for (std::size_t i = 0; i < k; ++i) {
    for (const auto p : final_state.items[i]) {
      rank_of[static_cast<std::size_t>(p)] = static_cast<std::int32_t>(i);
    }
  }
  return detail::heavy_first_steps(packs, s, rank_of);
}

} // namespace packswap::bench
