#pragma once

#include "packswap/error.hpp"
#include "packswap/span.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace packswap {

/// One sample as the packers and cost models see it: a view into a `sample_set`.
///
/// `tokens` counts every token of the sample's sequence, image tokens included. `images` holds
/// the token count of each image (so quadratic per-image terms can be computed); `documents` holds
/// the lengths of the documents the sample's sequence is made of (attention does not cross them),
/// which add up to `tokens`. Valid while the `sample_set` it came from is alive and unchanged.
struct sample_view {
  std::int64_t tokens = 0;            ///< all tokens of the sample, image tokens included
  std::int64_t image_tokens = 0;      ///< the sum of `images`
  span<const std::int32_t> images;    ///< token count of each image, in sequence order
  span<const std::int32_t> documents; ///< length of each document, in sequence order
};

/// An ordered stream of samples, stored flat (CSR): four arrays however many samples it holds.
///
/// A sample is atomic: packers place it whole or not at all. Every count is validated when the
/// sample is added, so a `sample_set` always satisfies: `1 <= tokens <= 2^31 - 1`, every image
/// and every document has at least one token, the image tokens add up to at most `tokens`, the
/// document lengths add up to exactly `tokens`, and the set holds at most 2^31 - 1 samples (sample
/// ids are `std::int32_t`). Not thread-safe for writing; concurrent reads are fine.
///
/// ```
/// packswap::sample_set set;
/// set.push_back(1800);                                     // text only, one document
/// const std::int64_t images[] = {1024, 256};
/// set.push_back(2100, {images, 2});                        // two images, one document
/// const std::int64_t docs[] = {700, 900};
/// set.push_back(1600, {}, {docs, 2});                      // text only, two documents
/// assert(set.size() == 3 && set.image_tokens(1) == 1280);
/// ```
class sample_set {
 public:
  sample_set() = default;

  /// Appends one sample. `images` lists the token count of each image; `documents` lists the
  /// document lengths (empty: one document of `tokens`). Throws `errc::invalid_argument` naming
  /// the sample's index and the offending values when a count is out of range; the set is then
  /// unchanged.
  void push_back(std::int64_t tokens, span<const std::int64_t> images = {},
                 span<const std::int64_t> documents = {}) {
    const auto id = size();
    PACKSWAP_EXPECTS(id < std::size_t{max_count}, errc::invalid_argument,
                     "a sample_set holds at most " << max_count << " samples");
    PACKSWAP_EXPECTS(tokens >= 1 && tokens <= max_count, errc::invalid_argument,
                     "sample " << id << " has " << tokens << " tokens, must be in [1, " << max_count
                               << "]");
    std::int64_t image_sum = 0;
    for (std::size_t i = 0; i < images.size(); ++i) {
      PACKSWAP_EXPECTS(images[i] >= 1 && images[i] <= tokens, errc::invalid_argument,
                       "sample " << id << " image " << i << " has " << images[i]
                                 << " tokens, must be in [1, " << tokens << "]");
      image_sum += images[i]; // cannot overflow: each term is below 2^31 and so is the count
      PACKSWAP_EXPECTS(image_sum <= tokens, errc::invalid_argument,
                       "sample " << id << " has more image tokens (" << image_sum << " after image "
                                 << i << ") than tokens (" << tokens << ")");
    }
    std::int64_t doc_sum = 0;
    for (std::size_t d = 0; d < documents.size(); ++d) {
      PACKSWAP_EXPECTS(documents[d] >= 1 && documents[d] <= tokens, errc::invalid_argument,
                       "sample " << id << " document " << d << " has " << documents[d]
                                 << " tokens, must be in [1, " << tokens << "]");
      doc_sum += documents[d];
      PACKSWAP_EXPECTS(doc_sum <= tokens, errc::invalid_argument,
                       "sample " << id << " has documents longer in total (" << doc_sum
                                 << " after document " << d << ") than its " << tokens
                                 << " tokens");
    }
    PACKSWAP_EXPECTS(documents.empty() || doc_sum == tokens, errc::invalid_argument,
                     "sample " << id << " has documents of " << doc_sum << " tokens in total, "
                               << "must add up to its " << tokens << " tokens");
    tokens_.push_back(static_cast<std::int32_t>(tokens));
    image_sum_.push_back(static_cast<std::int32_t>(image_sum));
    for (const auto t : images) {
      images_.push_back(static_cast<std::int32_t>(t));
    }
    if (documents.empty()) {
      documents_.push_back(static_cast<std::int32_t>(tokens));
    }
    for (const auto d : documents) {
      documents_.push_back(static_cast<std::int32_t>(d));
    }
    image_end_.push_back(static_cast<std::int64_t>(images_.size()));
    document_end_.push_back(static_cast<std::int64_t>(documents_.size()));
    total_tokens_ += tokens;
    total_image_tokens_ += image_sum;
  }

  /// Reserves room for `samples` samples with `images` images and `documents` documents in all.
  void reserve(std::size_t samples, std::size_t images = 0, std::size_t documents = 0) {
    tokens_.reserve(samples);
    image_sum_.reserve(samples);
    image_end_.reserve(samples);
    document_end_.reserve(samples);
    images_.reserve(images);
    documents_.reserve(documents == 0 ? samples : documents);
  }

  /// The number of samples.
  [[nodiscard]] std::size_t size() const noexcept { return tokens_.size(); }
  /// Whether there is no sample.
  [[nodiscard]] bool empty() const noexcept { return tokens_.empty(); }

  /// Tokens of sample `i` (image tokens included).
  [[nodiscard]] std::int64_t tokens(std::size_t i) const noexcept { return tokens_[i]; }
  /// Image tokens of sample `i` (the sum over its images).
  [[nodiscard]] std::int64_t image_tokens(std::size_t i) const noexcept { return image_sum_[i]; }
  /// Token count of each image of sample `i`.
  [[nodiscard]] span<const std::int32_t> images(std::size_t i) const noexcept {
    const auto begin = i == 0 ? 0 : image_end_[i - 1];
    return {images_.data() + begin, static_cast<std::size_t>(image_end_[i] - begin)};
  }
  /// Length of each document of sample `i` (at least one document).
  [[nodiscard]] span<const std::int32_t> documents(std::size_t i) const noexcept {
    const auto begin = i == 0 ? 0 : document_end_[i - 1];
    return {documents_.data() + begin, static_cast<std::size_t>(document_end_[i] - begin)};
  }
  /// Everything about sample `i`.
  [[nodiscard]] sample_view operator[](std::size_t i) const noexcept {
    return {tokens(i), image_tokens(i), images(i), documents(i)};
  }

  /// Tokens of every sample, indexed by sample id: what the packers read.
  [[nodiscard]] span<const std::int32_t> tokens() const noexcept { return tokens_; }
  /// Image tokens of every sample, indexed by sample id.
  [[nodiscard]] span<const std::int32_t> image_tokens() const noexcept { return image_sum_; }

  /// Tokens over all samples.
  [[nodiscard]] std::int64_t total_tokens() const noexcept { return total_tokens_; }
  /// Image tokens over all samples.
  [[nodiscard]] std::int64_t total_image_tokens() const noexcept { return total_image_tokens_; }
  /// Images over all samples.
  [[nodiscard]] std::size_t total_images() const noexcept { return images_.size(); }

  /// The largest token count of one sample (and of one image, one document), `2^31 - 1`.
  static constexpr std::int64_t max_count = std::numeric_limits<std::int32_t>::max();

 private:
  std::vector<std::int32_t> tokens_;
  std::vector<std::int32_t> image_sum_;
  std::vector<std::int64_t> image_end_; // sample i's images are [image_end_[i-1], image_end_[i])
  std::vector<std::int64_t> document_end_;
  std::vector<std::int32_t> images_;
  std::vector<std::int32_t> documents_;
  std::int64_t total_tokens_ = 0;
  std::int64_t total_image_tokens_ = 0;
};

} // namespace packswap
