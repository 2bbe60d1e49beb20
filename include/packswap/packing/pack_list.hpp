#pragma once

#include "packswap/error.hpp"
#include "packswap/span.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace packswap {

/// What a packer does with a sample that can never fit a pack: more tokens than the capacity, or
/// (budgeted packer) more image tokens than the budget.
enum class oversize_policy {
  reject, ///< throw `errc::invalid_argument` naming the sample and its counts (the default)
  skip,   ///< leave it out of every pack and list it in `pack_list::skipped()`
};

/// The packs a packer made from a `sample_set`, stored flat (CSR): the sample ids of pack `p` are
/// `samples(p)`, in the order they were placed; packs are in the order they were closed.
///
/// The list enforces its own invariants as it is built, so a custom packer cannot produce a pack
/// over the capacity or the image budget: `add()` throws `errc::invalid_argument` instead.
/// Not thread-safe for writing; concurrent reads are fine.
///
/// ```
/// packswap::pack_list packs = packswap::pack_samples(set);
/// for (std::size_t p = 0; p < packs.size(); ++p)
///   std::cout << packs.tokens(p) << " tokens in " << packs.samples(p).size() << " samples\n";
/// ```
class pack_list {
 public:
  /// The budget of a list built without an image-token budget.
  static constexpr std::int64_t no_budget = std::numeric_limits<std::int64_t>::max();

  /// An empty list for packs of `capacity` tokens and at most `image_budget` image tokens each.
  explicit pack_list(std::int64_t capacity = 8192, std::int64_t image_budget = no_budget)
      : capacity_(capacity), budget_(image_budget) {
    PACKSWAP_EXPECTS(capacity >= 1, errc::invalid_argument,
                     "capacity is " << capacity << " tokens, must be at least 1");
    PACKSWAP_EXPECTS(image_budget >= 0, errc::invalid_argument,
                     "image budget is " << image_budget << " tokens, must be >= 0");
    end_.push_back(0);
  }

  /// Tokens one pack may hold.
  [[nodiscard]] std::int64_t capacity() const noexcept { return capacity_; }
  /// Image tokens one pack may hold (`no_budget` when unlimited).
  [[nodiscard]] std::int64_t image_budget() const noexcept { return budget_; }

  /// The number of closed packs.
  [[nodiscard]] std::size_t size() const noexcept { return tokens_.size(); }
  /// Whether there is no closed pack.
  [[nodiscard]] bool empty() const noexcept { return tokens_.empty(); }

  /// Sample ids of pack `p`, in placement order.
  [[nodiscard]] span<const std::int32_t> samples(std::size_t p) const noexcept {
    return {ids_.data() + end_[p], static_cast<std::size_t>(end_[p + 1] - end_[p])};
  }
  /// Tokens in pack `p`.
  [[nodiscard]] std::int64_t tokens(std::size_t p) const noexcept { return tokens_[p]; }
  /// Image tokens in pack `p`.
  [[nodiscard]] std::int64_t image_tokens(std::size_t p) const noexcept { return image_tokens_[p]; }

  /// Tokens over all packs.
  [[nodiscard]] std::int64_t total_tokens() const noexcept { return total_tokens_; }
  /// Image tokens over all packs.
  [[nodiscard]] std::int64_t total_image_tokens() const noexcept { return total_image_tokens_; }
  /// Samples over all packs.
  [[nodiscard]] std::size_t total_samples() const noexcept { return ids_.size(); }
  /// Samples left out under `oversize_policy::skip`, in stream order.
  [[nodiscard]] span<const std::int32_t> skipped() const noexcept { return skipped_; }

  /// Reserves room for `samples` samples and `packs` packs.
  void reserve(std::size_t samples, std::size_t packs) {
    ids_.reserve(samples);
    end_.reserve(packs + 1);
    tokens_.reserve(packs);
    image_tokens_.reserve(packs);
  }

  /// Places sample `id` of `tokens` tokens, `image_tokens` of them image tokens, into the open
  /// pack. Throws `errc::invalid_argument` when the pack would exceed the capacity or the budget.
  void add(std::int32_t id, std::int64_t tokens, std::int64_t image_tokens) {
    PACKSWAP_EXPECTS(tokens >= 1 && image_tokens >= 0 && image_tokens <= tokens,
                     errc::invalid_argument,
                     "sample " << id << " has " << tokens << " tokens and " << image_tokens
                               << " image tokens, must be >= 1 and in [0, tokens]");
    PACKSWAP_EXPECTS(tokens <= capacity_ - open_tokens_, errc::invalid_argument,
                     "sample " << id << " has " << tokens << " tokens, pack " << size()
                               << " has room for " << capacity_ - open_tokens_ << " of "
                               << capacity_);
    PACKSWAP_EXPECTS(image_tokens <= budget_ - open_image_tokens_, errc::invalid_argument,
                     "sample " << id << " has " << image_tokens << " image tokens, pack " << size()
                               << " has room for " << budget_ - open_image_tokens_
                               << " of the budget " << budget_);
    ids_.push_back(id);
    open_tokens_ += tokens;
    open_image_tokens_ += image_tokens;
  }

  /// Closes the open pack; does nothing when it holds no sample (no pack is ever empty).
  void close() {
    if (ids_.size() == static_cast<std::size_t>(end_.back())) {
      return;
    }
    end_.push_back(static_cast<std::int64_t>(ids_.size()));
    tokens_.push_back(open_tokens_);
    image_tokens_.push_back(open_image_tokens_);
    total_tokens_ += open_tokens_;
    total_image_tokens_ += open_image_tokens_;
    open_tokens_ = 0;
    open_image_tokens_ = 0;
  }

  /// Records that sample `id` was left out (`oversize_policy::skip`).
  void skip(std::int32_t id) { skipped_.push_back(id); }

 private:
  std::int64_t capacity_;
  std::int64_t budget_;
  std::vector<std::int32_t> ids_;
  std::vector<std::int64_t> end_; // pack p holds ids_[end_[p], end_[p+1])
  std::vector<std::int64_t> tokens_;
  std::vector<std::int64_t> image_tokens_;
  std::vector<std::int32_t> skipped_;
  std::int64_t open_tokens_ = 0;
  std::int64_t open_image_tokens_ = 0;
  std::int64_t total_tokens_ = 0;
  std::int64_t total_image_tokens_ = 0;
};

} // namespace packswap
