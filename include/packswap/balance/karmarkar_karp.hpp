#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/detail/sort.hpp"
#include "packswap/span.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace packswap::detail {

/// Equal-size Karmarkar–Karp (largest differencing) over pre-formed chunks.
///
/// `chunks` lists item ids chunk by chunk, `k` per chunk, each chunk ordered by value descending
/// (ties by id ascending). The result gives every item a set in `[0, k)` such that each set takes
/// exactly one item of every chunk; sets are numbered by final sum descending. Deterministic:
/// after each merge the sets are re-sorted stably, so ties keep an order fixed by the input.
///
/// Guarantee: the final spread (largest minus smallest set sum) is at most the largest spread of
/// one chunk, so the largest set is at most ceil(total / k) + that spread.
class karmarkar_karp {
 public:
  /// `value[id]` is the value of item `id`; `chunks.size()` must be a multiple of `k`.
  karmarkar_karp(span<const std::int64_t> value, span<const std::int32_t> chunks, std::int32_t k) {
    run(value, chunks, k);
  }

  /// An empty partition, for `run()`.
  karmarkar_karp() = default;

  /// Partitions anew (same arguments as the constructor), reusing the memory of earlier runs.
  void run(span<const std::int64_t> value, span<const std::int32_t> chunks, std::int32_t k) {
    k_ = static_cast<std::size_t>(k);
    const std::size_t n = chunks.size();
    const std::size_t states = k_ == 0 ? 0 : n / k_;
    chunks_ = states;
    // A list's links are written by the merges before any walk reads them (a walk reads one
    // link past each list's tail and drops it), so next_ needs no reset: only its size. With
    // mbs > 1 stage 1 runs once per micro-step over the batch's costs, and a reset of all of
    // them each time made it O(N ga).
    if (next_.size() < value.size()) {
      next_.resize(value.size());
    }
    sets_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (i + fetch_ahead < n) {
        prefetch(&value[static_cast<std::size_t>(chunks[i + fetch_ahead])]); // ids run at random
      }
      const auto id = chunks[i];
      sets_[i] = set{value[static_cast<std::size_t>(id)], id, id};
    }
    scratch_.resize(k_);
    // Max-heap of states, largest spread first; ties pick the lower state id.
    heap_.clear();
    for (std::size_t s = 0; s < states; ++s) {
      heap_.emplace_back(spread(s), -static_cast<std::int64_t>(s));
      std::push_heap(heap_.begin(), heap_.end());
    }
    const auto pop = [&] {
      std::pop_heap(heap_.begin(), heap_.end());
      const auto s = static_cast<std::size_t>(-heap_.back().second);
      heap_.pop_back();
      return s;
    };
    while (heap_.size() > 1) {
      const std::size_t x = pop();
      const std::size_t y = pop();
      merge(x, y);
      heap_.emplace_back(spread(x), -static_cast<std::int64_t>(x));
      std::push_heap(heap_.begin(), heap_.end());
    }
    final_ = heap_.empty() ? 0 : static_cast<std::size_t>(-heap_.front().second);
  }

  /// Calls `f(id, set)` for every item of the chunks. Each set's items form a list; the lists
  /// of up to `walk_width` sets are walked side by side, so their loads are in flight together
  /// rather than one after the other (at 262,144 items, one list at a time spent most of its
  /// time waiting on memory).
  template <class F>
  void for_each(F&& f) const {
    if (chunks_ == 0) {
      return;
    }
    const set* last = sets_.data() + final_ * k_;
    for (std::size_t first = 0; first < k_; first += walk_width) {
      const std::size_t width = std::min(walk_width, k_ - first);
      std::int32_t at[walk_width];
      for (std::size_t j = 0; j < width; ++j) {
        at[j] = last[first + j].head;
      }
      // Every set holds one item of each chunk: each list is `chunks_` long.
      for (std::size_t step = 0; step < chunks_; ++step) {
        for (std::size_t j = 0; j < width; ++j) {
          f(at[j], static_cast<std::int32_t>(first + j));
          at[j] = next_[static_cast<std::size_t>(at[j])];
        }
      }
    }
  }

  /// Writes the set of every item reachable from the chunks into `set_of` (indexed by item id).
  void assign(span<std::int32_t> set_of) const {
    for_each([&](std::int32_t id, std::int32_t j) { set_of[static_cast<std::size_t>(id)] = j; });
  }

  /// Sum of set `j` of the final partition.
  std::int64_t sum(std::int32_t j) const {
    return sets_[final_ * k_ + static_cast<std::size_t>(j)].sum;
  }

 private:
  struct set {
    std::int64_t sum;
    std::int32_t head;
    std::int32_t tail;
  };

  std::int64_t spread(std::size_t s) const {
    return sets_[s * k_].sum - sets_[s * k_ + k_ - 1].sum;
  }

  // Pairs x's largest set with y's smallest, and so on; the result replaces x, sorted again.
  void merge(std::size_t x, std::size_t y) {
    set* a = &sets_[x * k_];
    const set* b = &sets_[y * k_];
    for (std::size_t i = 0; i < k_; ++i) {
      if (i + fetch_ahead < k_) {
        prefetch(&next_[static_cast<std::size_t>(a[i + fetch_ahead].tail)]); // tails run at random
      }
      const set& other = b[k_ - 1 - i];
      next_[static_cast<std::size_t>(a[i].tail)] = other.head;
      scratch_[i] = set{a[i].sum + other.sum, a[i].head, other.tail};
    }
    stable_sort_desc(scratch_.data(), k_, radix_scratch_, [](const set& v) { return v.sum; });
    std::copy(scratch_.begin(), scratch_.end(), a);
  }

  // How far ahead the loops over items at random places fetch them.
  static constexpr std::size_t fetch_ahead = 16;

  // Lists `for_each` walks side by side.
  static constexpr std::size_t walk_width = 16;

  std::size_t k_ = 0;
  std::vector<std::int32_t> next_;
  std::vector<set> sets_;
  std::vector<set> scratch_;
  std::vector<set> radix_scratch_;
  std::vector<std::pair<std::int64_t, std::int64_t>> heap_; // (spread, -state)
  std::size_t final_ = 0;
  std::size_t chunks_ = 0;
};

} // namespace packswap::detail
