#pragma once

#include "packswap/error.hpp"
#include "packswap/packing/pack_list.hpp"
#include "packswap/packing/sample.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace packswap::detail {

/// The largest pack capacity the packers accept: they keep a few arrays indexed by token count.
inline constexpr std::int64_t max_pack_capacity = std::int64_t{1} << 22;

/// A set of integers in `[0, n)` that finds the largest member `<= x` in a few word operations:
/// one 64-bit word per 64 members, and above that one bit per non-empty word, up to a single word.
class bit_tree {
 public:
  void reset(std::int64_t n) {
    levels_.clear();
    auto words = static_cast<std::size_t>((n + 63) / 64);
    do {
      levels_.emplace_back(std::max<std::size_t>(words, 1), 0);
      words = (words + 63) / 64;
    } while (levels_.back().size() > 1);
  }

  void insert(std::int64_t x) noexcept {
    auto i = static_cast<std::size_t>(x);
    for (auto& level : levels_) {
      const bool was_empty = level[i / 64] == 0;
      level[i / 64] |= std::uint64_t{1} << (i % 64);
      if (!was_empty) {
        return;
      }
      i /= 64;
    }
  }

  void erase(std::int64_t x) noexcept {
    auto i = static_cast<std::size_t>(x);
    for (auto& level : levels_) {
      level[i / 64] &= ~(std::uint64_t{1} << (i % 64));
      if (level[i / 64] != 0) {
        return;
      }
      i /= 64;
    }
  }

  /// The largest member `<= x` (`x >= 0`), or -1 when there is none.
  std::int64_t find_prev(std::int64_t x) const noexcept {
    auto i = static_cast<std::size_t>(x);
    for (std::size_t l = 0; l < levels_.size(); ++l) {
      const std::size_t w = i / 64;
      const unsigned b = i % 64;
      const std::uint64_t upto = b == 63 ? ~std::uint64_t{0} : (std::uint64_t{2} << b) - 1;
      const std::uint64_t m = levels_[l][w] & upto;
      if (m != 0) {
        i = w * 64 + static_cast<std::size_t>(highest_bit(m));
        // Down again: the highest member of each word on the way.
        while (l-- > 0) {
          i = i * 64 + static_cast<std::size_t>(highest_bit(levels_[l][i]));
        }
        return static_cast<std::int64_t>(i);
      }
      if (w == 0) {
        return -1;
      }
      i = w - 1;
    }
    return -1;
  }

 private:
  // Index of the highest set bit of `x`, which must not be 0.
  static int highest_bit(std::uint64_t x) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    return 63 - __builtin_clzll(x);
#else
    int i = 0;
    while (x >>= 1) {
      ++i;
    }
    return i;
#endif
  }

  std::vector<std::vector<std::uint64_t>> levels_;
};

/// One FIFO queue of buffered samples per token count, in a slot pool of fixed size: after
/// `reset` no operation allocates.
class bucket_queues {
 public:
  static constexpr std::int32_t none = -1;

  void reset(std::int64_t buckets, std::int64_t slots) {
    head_.assign(static_cast<std::size_t>(buckets), none);
    tail_.assign(static_cast<std::size_t>(buckets), none);
    next_.assign(static_cast<std::size_t>(slots), none);
    id_.assign(static_cast<std::size_t>(slots), 0);
    image_.assign(static_cast<std::size_t>(slots), 0);
    free_.resize(static_cast<std::size_t>(slots));
    for (std::size_t s = 0; s < free_.size(); ++s) {
      free_[s] = static_cast<std::int32_t>(free_.size() - 1 - s);
    }
  }

  bool empty(std::int64_t bucket) const noexcept { return head(bucket) == none; }
  bool single(std::int64_t bucket) const noexcept {
    return head(bucket) != none && head(bucket) == tail_[static_cast<std::size_t>(bucket)];
  }

  void push_back(std::int64_t bucket, std::int32_t id, std::int32_t image_tokens) noexcept {
    const std::int32_t slot = free_.back();
    free_.pop_back();
    const auto s = static_cast<std::size_t>(slot);
    id_[s] = id;
    image_[s] = image_tokens;
    next_[s] = none;
    const auto b = static_cast<std::size_t>(bucket);
    if (tail_[b] == none) {
      head_[b] = slot;
    } else {
      next_[static_cast<std::size_t>(tail_[b])] = slot;
    }
    tail_[b] = slot;
  }

  /// Removes and returns the oldest sample of `bucket`, which must not be empty.
  std::int32_t pop_front(std::int64_t bucket) noexcept { return unlink(bucket, none); }

  /// The slot of the oldest sample of `bucket` with at most `image_limit` image tokens other than
  /// `except`, or `none`.
  std::int32_t oldest_within(std::int64_t bucket, std::int64_t image_limit,
                             std::int32_t except = none) const noexcept {
    auto s = head(bucket);
    while (s != none && (s == except || image_[static_cast<std::size_t>(s)] > image_limit)) {
      s = next_[static_cast<std::size_t>(s)];
    }
    return s;
  }

  /// Removes and returns the oldest sample of `bucket` with at most `image_limit` image tokens;
  /// one must exist.
  std::int32_t pop_oldest_within(std::int64_t bucket, std::int64_t image_limit) noexcept {
    std::int32_t prev = none;
    std::int32_t slot = head(bucket);
    while (image_[static_cast<std::size_t>(slot)] > image_limit) {
      prev = slot;
      slot = next_[static_cast<std::size_t>(slot)];
    }
    return unlink(bucket, prev);
  }

  /// The fewest image tokens of a sample in `bucket`, `INT32_MAX` when it is empty.
  std::int32_t min_image(std::int64_t bucket) const noexcept {
    std::int32_t m = std::numeric_limits<std::int32_t>::max();
    for (auto s = head(bucket); s != none; s = next_[static_cast<std::size_t>(s)]) {
      m = std::min(m, image_[static_cast<std::size_t>(s)]);
    }
    return m;
  }

  /// Image tokens of the sample in `slot`.
  std::int32_t image(std::int32_t slot) const noexcept {
    return image_[static_cast<std::size_t>(slot)];
  }

 private:
  std::int32_t head(std::int64_t bucket) const noexcept {
    return head_[static_cast<std::size_t>(bucket)];
  }

  // Unlinks the slot after `prev` (the head when `prev` is `none`) and returns its sample.
  std::int32_t unlink(std::int64_t bucket, std::int32_t prev) noexcept {
    const auto b = static_cast<std::size_t>(bucket);
    const std::int32_t slot = prev == none ? head_[b] : next_[static_cast<std::size_t>(prev)];
    const auto s = static_cast<std::size_t>(slot);
    if (prev == none) {
      head_[b] = next_[s];
    } else {
      next_[static_cast<std::size_t>(prev)] = next_[s];
    }
    if (tail_[b] == slot) {
      tail_[b] = prev;
    }
    free_.push_back(slot);
    return id_[s];
  }

  std::vector<std::int32_t> head_;
  std::vector<std::int32_t> tail_;
  std::vector<std::int32_t> next_;
  std::vector<std::int32_t> id_;
  std::vector<std::int32_t> image_;
  std::vector<std::int32_t> free_;
};

// Both candidate buffers answer the same five calls, which is all `pack_buffered` uses:
// - insert(id, tokens, image_tokens)
// - largest(room, image_room): the token count of the sample `take` would remove, or -1;
// - take(room, image_room): removes and returns the largest buffered sample (by tokens) within
//   both rooms, the oldest such of that size; -1 when none fits;
// - take_oldest(tokens): removes and returns the oldest sample of that token count;
// - pair_fill(y, room, image_room): with `y = largest(below, image_room)` for some `below`, the
//   tokens of the pair that `take(y, image_room)` would start, followed by the largest sample
//   that then still fits. Pure: nothing is removed.

/// The 1D candidate buffer: buffered samples by token count, and a bit tree of the counts present.
class largest_fit_buffer {
 public:
  void reset(std::int64_t capacity, std::int64_t slots) {
    queues_.reset(capacity + 1, slots);
    present_.reset(capacity + 1);
  }

  void insert(std::int32_t id, std::int64_t tokens, std::int64_t image_tokens) noexcept {
    if (queues_.empty(tokens)) {
      present_.insert(tokens);
    }
    queues_.push_back(tokens, id, static_cast<std::int32_t>(image_tokens));
  }

  std::int64_t largest(std::int64_t room, std::int64_t /*image_room*/) const noexcept {
    return present_.find_prev(room);
  }

  std::int32_t take(std::int64_t room, std::int64_t /*image_room*/) noexcept {
    const std::int64_t t = present_.find_prev(room);
    return t < 0 ? -1 : take_oldest(t);
  }

  std::int32_t take_oldest(std::int64_t tokens) noexcept {
    const std::int32_t id = queues_.pop_front(tokens);
    if (queues_.empty(tokens)) {
      present_.erase(tokens);
    }
    return id;
  }

  std::int64_t pair_fill(std::int64_t y, std::int64_t room,
                         std::int64_t /*image_room*/) const noexcept {
    std::int64_t z = present_.find_prev(room - y);
    if (z == y && queues_.single(y)) {
      z = y >= 1 ? present_.find_prev(y - 1) : -1; // y itself is the only one of its size
    }
    return y + std::max<std::int64_t>(z, 0);
  }

 private:
  bucket_queues queues_;
  bit_tree present_;
};

/// The 2D candidate buffer: buffered samples by token count, and a min-tree over token counts
/// holding the fewest image tokens of each count's queue, so "the largest sample within both
/// rooms" is O(log capacity) plus the walk of one queue (a handful of samples, unless many
/// buffered samples share a token count).
class budgeted_fit_buffer {
 public:
  void reset(std::int64_t capacity, std::int64_t slots) {
    queues_.reset(capacity + 1, slots);
    leaves_ = 1;
    while (leaves_ < static_cast<std::size_t>(capacity + 1)) {
      leaves_ *= 2;
    }
    tree_.assign(2 * leaves_, empty);
  }

  void insert(std::int32_t id, std::int64_t tokens, std::int64_t image_tokens) noexcept {
    queues_.push_back(tokens, id, static_cast<std::int32_t>(image_tokens));
    const auto leaf = leaves_ + static_cast<std::size_t>(tokens);
    if (image_tokens < tree_[leaf]) {
      set(leaf, static_cast<std::int32_t>(image_tokens));
    }
  }

  std::int64_t largest(std::int64_t room, std::int64_t image_room) const noexcept {
    return find_prev(static_cast<std::size_t>(room), clamp(image_room));
  }

  std::int32_t take(std::int64_t room, std::int64_t image_room) noexcept {
    const auto limit = clamp(image_room);
    const std::int64_t t = find_prev(static_cast<std::size_t>(room), limit);
    return t < 0 ? -1 : after_removal(t, queues_.pop_oldest_within(t, limit));
  }

  std::int32_t take_oldest(std::int64_t tokens) noexcept {
    return after_removal(tokens, queues_.pop_front(tokens));
  }

  std::int64_t pair_fill(std::int64_t y, std::int64_t room,
                         std::int64_t image_room) const noexcept {
    const std::int32_t first = queues_.oldest_within(y, clamp(image_room));
    const auto limit = clamp(image_room - queues_.image(first));
    std::int64_t z = find_prev(static_cast<std::size_t>(room - y), limit);
    if (z == y && queues_.oldest_within(y, limit, first) == bucket_queues::none) {
      z = y >= 1 ? find_prev(static_cast<std::size_t>(y - 1), limit) : -1;
    }
    return y + std::max<std::int64_t>(z, 0);
  }

 private:
  static constexpr std::int32_t empty = std::numeric_limits<std::int32_t>::max();

  // Stored values never exceed the capacity, so a clamped limit never matches `empty`.
  static std::int32_t clamp(std::int64_t image_room) noexcept {
    return static_cast<std::int32_t>(std::min<std::int64_t>(image_room, empty - 1));
  }

  std::int32_t after_removal(std::int64_t t, std::int32_t id) noexcept {
    set(leaves_ + static_cast<std::size_t>(t), queues_.min_image(t));
    return id;
  }

  void set(std::size_t node, std::int32_t value) noexcept {
    tree_[node] = value;
    for (node /= 2; node >= 1; node /= 2) {
      tree_[node] = std::min(tree_[2 * node], tree_[2 * node + 1]);
    }
  }

  // The largest leaf index <= x whose value is <= limit, or -1.
  std::int64_t find_prev(std::size_t x, std::int32_t limit) const noexcept {
    std::size_t node = leaves_ + x;
    if (tree_[node] <= limit) {
      return static_cast<std::int64_t>(x);
    }
    // Up until a left sibling (all of whose leaves lie left of x) holds a match, then down to
    // its rightmost matching leaf.
    for (; node > 1; node /= 2) {
      if ((node & 1) != 0 && tree_[node - 1] <= limit) {
        node -= 1;
        while (node < leaves_) {
          node = tree_[2 * node + 1] <= limit ? 2 * node + 1 : 2 * node;
        }
        return static_cast<std::int64_t>(node - leaves_);
      }
    }
    return -1;
  }

  bucket_queues queues_;
  std::vector<std::int32_t> tree_; // tree_[1] is the root, leaves at [leaves_, 2 * leaves_)
  std::size_t leaves_ = 1;
};

/// Checks the parameters every packer shares.
inline void validate_packer(std::int64_t capacity, std::int64_t buffer, std::int64_t lookahead) {
  PACKSWAP_EXPECTS(capacity >= 1 && capacity <= max_pack_capacity, errc::invalid_argument,
                   "capacity is " << capacity << " tokens, must be in [1, " << max_pack_capacity
                                  << "]");
  PACKSWAP_EXPECTS(buffer >= 1, errc::invalid_argument,
                   "buffer is " << buffer << " samples, must be at least 1");
  PACKSWAP_EXPECTS(lookahead >= 0, errc::invalid_argument,
                   "lookahead is " << lookahead << ", must be >= 0");
}

/// The parameters of `pack_buffered`.
struct buffered_params {
  std::int64_t capacity = 0;
  std::int64_t budget = 0;
  std::int64_t buffer = 0;
  std::int64_t lookahead = 0;
  oversize_policy policy = oversize_policy::reject;
};

/// The streaming loop both packers share, like a data loader's. Samples enter a buffer of at most
/// `buffer` candidates in stream order, one each time one leaves. Each pack opens with the oldest
/// buffered sample, then takes the largest one that fits (`Buffer::take`) until none does. When
/// the largest fit would leave a gap no buffered sample fits, up to `lookahead` smaller sizes are
/// tried first, each with the largest sample that fits after it, and the pair filling the pack
/// best wins (ties: the larger first sample). At the end the buffer drains the same way.
///
/// Opening with the oldest sample bounds reordering (a sample waits at most `buffer` packs once
/// buffered) and keeps large samples in the buffer, where they fill gaps (see `greedy_packer`).
/// A new pack always takes a sample (every buffered one fits an empty pack), so the loop ends
/// after at most one pack per sample.
template <class Buffer>
pack_list pack_buffered(const sample_set& set, const buffered_params& prm, Buffer& candidates) {
  const auto tokens = set.tokens();
  const auto images = set.image_tokens();
  const std::size_t n = set.size();
  pack_list out(prm.capacity, prm.budget);
  const auto slots = std::min<std::int64_t>(prm.buffer, static_cast<std::int64_t>(n));
  candidates.reset(prm.capacity, slots);
  // Any two consecutive packs together hold more than the capacity (the second's first sample
  // did not fit the first), so this rarely reallocates.
  out.reserve(n, static_cast<std::size_t>(set.total_tokens() / prm.capacity * 2 + 2));

  // Stream positions of samples not yet placed or skipped are exactly those >= `oldest` with
  // done[i] == 0; the oldest buffered sample is therefore the first such position below `next`.
  std::vector<char> done(n, 0);
  std::size_t oldest = 0;
  std::size_t next = 0;
  std::int64_t buffered = 0;
  const auto admit = [&] {
    for (; buffered < slots && next < n; ++next) {
      const std::int64_t t = tokens[next];
      const std::int64_t img = images[next];
      if (t > prm.capacity || img > prm.budget) {
        PACKSWAP_EXPECTS(
            prm.policy == oversize_policy::skip || t <= prm.capacity, errc::invalid_argument,
            "sample " << next << " has " << t << " tokens, capacity is " << prm.capacity);
        PACKSWAP_EXPECTS(prm.policy == oversize_policy::skip, errc::invalid_argument,
                         "sample " << next << " has " << img
                                   << " image tokens, the image budget is " << prm.budget);
        out.skip(static_cast<std::int32_t>(next));
        done[next] = 1;
        continue;
      }
      candidates.insert(static_cast<std::int32_t>(next), t, img);
      ++buffered;
    }
  };
  // The largest fit, unless a pair that starts lower fills the pack better (see above).
  const auto choose = [&](std::int64_t room, std::int64_t image_room) -> std::int32_t {
    const std::int64_t a = candidates.largest(room, image_room);
    if (a < 0 || prm.lookahead == 0 || candidates.pair_fill(a, room, image_room) > a) {
      return candidates.take(room, image_room);
    }
    std::int64_t best_first = a;
    std::int64_t best_fill = a;
    std::int64_t below = a - 1;
    for (std::int64_t k = 0; k < prm.lookahead && below >= 1 && best_fill < room; ++k) {
      const std::int64_t y = candidates.largest(below, image_room);
      if (y < 0) {
        break;
      }
      const std::int64_t fill = candidates.pair_fill(y, room, image_room);
      if (fill > best_fill) {
        best_fill = fill;
        best_first = y;
      }
      below = y - 1;
    }
    return candidates.take(best_first, image_room);
  };

  admit();
  while (buffered > 0) {
    while (done[oldest] != 0) {
      ++oldest;
    }
    std::int32_t id = candidates.take_oldest(tokens[oldest]);
    std::int64_t room = prm.capacity;
    std::int64_t image_room = prm.budget;
    do {
      const auto s = static_cast<std::size_t>(id);
      out.add(id, tokens[s], images[s]);
      room -= tokens[s];
      image_room -= images[s];
      done[s] = 1;
      --buffered;
      admit();
      id = choose(room, image_room);
    } while (id >= 0);
    out.close();
  }
  return out;
}

} // namespace packswap::detail
