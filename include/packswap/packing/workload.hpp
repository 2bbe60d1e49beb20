#pragma once

#include "packswap/detail/checked.hpp"
#include "packswap/detail/prng.hpp"
#include "packswap/error.hpp"
#include "packswap/packing/sample.hpp"
#include "packswap/span.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace packswap {

/// Integers drawn uniformly from `[lo, hi]`, picked with relative frequency `weight` among the
/// bands of one list.
struct weighted_band {
  std::int64_t weight = 1; ///< relative frequency, >= 0
  std::int64_t lo = 0;     ///< smallest value drawn
  std::int64_t hi = 0;     ///< largest value drawn, >= lo
};

/// One kind of sample in a workload mix, e.g. "single image with a caption".
///
/// An image's token count is `width * height`, each drawn independently from one band of
/// `image_sides` (one band per image), in merged patches of 28 x 28 pixels: a 28-pixel-wide side
/// is 1 (a ViT with 14-pixel patches and a 2 x 2 merge, as in Qwen2-VL), so a 896 x 672 image is
/// 32 x 24 = 768 tokens. A sample's tokens are its image tokens plus its text tokens.
struct sample_kind {
  std::string name;            ///< shown in reports, e.g. "single-image"
  std::int64_t weight = 1;     ///< relative frequency among the workload's kinds, >= 0
  std::int64_t min_images = 0; ///< images per sample, uniform in [min_images, max_images]
  std::int64_t max_images = 0; ///< see `min_images`
  std::vector<weighted_band> image_sides; ///< image side bands; needed when max_images > 0
  std::vector<weighted_band> text_tokens; ///< text token bands, lo >= 1
  std::int64_t min_documents = 1; ///< documents per sample, uniform in [min, max] (see generate)
  std::int64_t max_documents = 1; ///< see `min_documents`
};

/// A named mix of sample kinds: what `generate` draws a stream from.
struct workload {
  std::string name;               ///< the preset's name, e.g. "vlm-pretrain"
  std::string description;        ///< one line for reports
  std::vector<sample_kind> kinds; ///< the mix
  /// The longest sample. A longer draw is trimmed: its last images are dropped while the images
  /// alone leave no room for one text token, then its text is shortened to fit (real pipelines
  /// resize or filter such samples; no sample is ever split).
  std::int64_t max_sample_tokens = 8192;
};

namespace detail {

inline void validate_bands(const std::vector<weighted_band>& bands, std::int64_t min_lo,
                           const std::string& what) {
  PACKSWAP_EXPECTS(!bands.empty(), errc::invalid_argument, what << " has no band");
  std::int64_t total = 0;
  for (std::size_t b = 0; b < bands.size(); ++b) {
    const auto& band = bands[b];
    PACKSWAP_EXPECTS(band.weight >= 0 && band.lo >= min_lo && band.lo <= band.hi &&
                         band.hi <= sample_set::max_count,
                     errc::invalid_argument,
                     what << " band " << b << " is {weight " << band.weight << ", " << band.lo
                          << ".." << band.hi << "}, needs weight >= 0 and " << min_lo
                          << " <= lo <= hi <= " << sample_set::max_count);
    total = checked_add(total, band.weight, "band weights");
  }
  PACKSWAP_EXPECTS(total > 0, errc::invalid_argument, what << " has no band of positive weight");
}

// The index of a band drawn with probability proportional to its weight.
template <class Weighted>
std::size_t pick_weighted(prng& rng, const std::vector<Weighted>& items) {
  std::uint64_t total = 0;
  for (const auto& it : items) {
    total += static_cast<std::uint64_t>(it.weight);
  }
  std::uint64_t r = rng.below(total);
  std::size_t i = 0;
  while (r >= static_cast<std::uint64_t>(items[i].weight)) {
    r -= static_cast<std::uint64_t>(items[i].weight);
    ++i;
  }
  return i;
}

inline std::int64_t draw_band(prng& rng, const std::vector<weighted_band>& bands) {
  const auto& band = bands[pick_weighted(rng, bands)];
  return rng.uniform(band.lo, band.hi);
}

} // namespace detail

/// Throws `errc::invalid_argument` naming the kind and field unless `w` can be drawn from: at
/// least one kind of positive weight, every band well formed, and every single image shorter
/// than `max_sample_tokens` (so trimming keeps at least one image and one text token).
inline void validate(const workload& w) {
  PACKSWAP_EXPECTS(w.max_sample_tokens >= 2 && w.max_sample_tokens <= sample_set::max_count,
                   errc::invalid_argument,
                   "workload '" << w.name << "' has max_sample_tokens " << w.max_sample_tokens
                                << ", must be in [2, " << sample_set::max_count << "]");
  PACKSWAP_EXPECTS(!w.kinds.empty(), errc::invalid_argument,
                   "workload '" << w.name << "' has no sample kind");
  std::int64_t total = 0;
  for (const auto& k : w.kinds) {
    const std::string what = "workload '" + w.name + "' kind '" + k.name + "'";
    PACKSWAP_EXPECTS(k.weight >= 0, errc::invalid_argument,
                     what << " has weight " << k.weight << ", must be >= 0");
    total = detail::checked_add(total, k.weight, "kind weights");
    PACKSWAP_EXPECTS(k.min_images >= 0 && k.min_images <= k.max_images && k.max_images <= 4096,
                     errc::invalid_argument,
                     what << " has images " << k.min_images << ".." << k.max_images
                          << ", needs 0 <= min <= max <= 4096");
    PACKSWAP_EXPECTS(k.min_documents >= 1 && k.min_documents <= k.max_documents &&
                         k.max_documents <= 4096,
                     errc::invalid_argument,
                     what << " has documents " << k.min_documents << ".." << k.max_documents
                          << ", needs 1 <= min <= max <= 4096");
    detail::validate_bands(k.text_tokens, 1, what + " text_tokens");
    if (k.max_images > 0) {
      detail::validate_bands(k.image_sides, 1, what + " image_sides");
      for (const auto& band : k.image_sides) {
        PACKSWAP_EXPECTS(band.hi * band.hi < w.max_sample_tokens, errc::invalid_argument,
                         what << " can draw an image of " << band.hi << " x " << band.hi
                              << " tokens, must be below max_sample_tokens "
                              << w.max_sample_tokens);
      }
    }
  }
  PACKSWAP_EXPECTS(total > 0, errc::invalid_argument,
                   "workload '" << w.name << "' has no kind of positive weight");
}

/// `count` samples drawn from `w`, bit-identical for a given `(w, count, seed)` on every compiler
/// and standard library (packswap's own PRNG and integer-only sampling). A prefix of the stream
/// does not depend on `count`.
///
/// Each sample: a kind by weight; its image count; each image's side band by weight and its
/// width and height; its text tokens by band; the trim of `workload::max_sample_tokens`; then
/// its documents: `k` uniform in the kind's range, at most the sample's tokens, made by `k - 1`
/// cut points uniform in the sequence (coinciding cuts merge documents).
///
/// ```
/// auto samples = packswap::generate(packswap::workload_preset("vlm-pretrain"), 100'000, 42);
/// ```
[[nodiscard]] inline sample_set generate(const workload& w, std::int64_t count,
                                         std::uint64_t seed) {
  validate(w);
  PACKSWAP_EXPECTS(count >= 0 && count <= sample_set::max_count, errc::invalid_argument,
                   "sample count is " << count << ", must be in [0, " << sample_set::max_count
                                      << "]");
  prng rng(seed);
  sample_set out;
  out.reserve(static_cast<std::size_t>(count));
  std::vector<std::int64_t> images;
  std::vector<std::int64_t> cuts;
  std::vector<std::int64_t> documents;
  for (std::int64_t i = 0; i < count; ++i) {
    const sample_kind& kind = w.kinds[detail::pick_weighted(rng, w.kinds)];
    images.clear();
    std::int64_t image_sum = 0;
    const std::int64_t n_images = rng.uniform(kind.min_images, kind.max_images);
    for (std::int64_t j = 0; j < n_images; ++j) {
      const auto& band = kind.image_sides[detail::pick_weighted(rng, kind.image_sides)];
      const std::int64_t width = rng.uniform(band.lo, band.hi);
      const std::int64_t height = rng.uniform(band.lo, band.hi);
      images.push_back(width * height);
      image_sum += width * height;
    }
    std::int64_t text = detail::draw_band(rng, kind.text_tokens);
    while (image_sum >= w.max_sample_tokens) {
      image_sum -= images.back();
      images.pop_back();
    }
    if (image_sum + text > w.max_sample_tokens) {
      text = w.max_sample_tokens - image_sum;
    }
    const std::int64_t tokens = image_sum + text;

    documents.clear();
    const std::int64_t k = std::min(rng.uniform(kind.min_documents, kind.max_documents), tokens);
    if (k > 1) {
      cuts.clear();
      for (std::int64_t c = 1; c < k; ++c) {
        cuts.push_back(rng.uniform(1, tokens - 1));
      }
      // Insertion sort: k is small, and std::sort's exact steps are not what determinism needs.
      for (std::size_t a = 1; a < cuts.size(); ++a) {
        for (std::size_t b = a; b > 0 && cuts[b - 1] > cuts[b]; --b) {
          std::swap(cuts[b - 1], cuts[b]);
        }
      }
      std::int64_t start = 0;
      for (const auto c : cuts) {
        if (c > start) {
          documents.push_back(c - start);
          start = c;
        }
      }
      documents.push_back(tokens - start);
    }
    out.push_back(tokens, images, documents);
  }
  return out;
}

/// The names `workload_preset` knows, the default first.
[[nodiscard]] inline std::vector<std::string> workload_preset_names() {
  return {"vlm-pretrain", "captioning", "high-res", "text-only"};
}

/// A named workload.
///
/// - `vlm-pretrain` (the default): a vision-language pretraining mix. Most samples carry images
///   and hold 1,200 to 4,200 tokens (79%; mean 2,229, at most about 5,500), with shorter text;
///   two thirds of all tokens are image tokens. Kinds, by share of samples:
///   - 40% caption: one image of 24 to 40 or 40 to 56 patches a side (576 to 3,136 tokens), 16 to
///     256 text tokens;
///   - 15% image QA / OCR: one image of 24 to 48 a side (576 to 2,304), 256 to 2,048 text tokens;
///   - 20% interleaved: 2 to 4 images of 16 to 32 a side (256 to 1,024 each), 512 to 2,048 text;
///   - 15% text only: 64 to 1,200 tokens (8 in 15) or 1,200 to 4,200, one to three documents;
///   - heavy tail: 5% high resolution, one image of 48 to 64 a side (2,304 to 4,096 tokens) with
///     16 to 512 text tokens, and 5% many images, 6 to 12 of 12 to 20 a side (144 to 400 each)
///     with 64 to 512 text tokens.
/// - `captioning`: 90% short captions (8 to 256 tokens) on one image of 8 to 32 patches a side
///   (64 to 1,024 tokens), 10% text of 64 to 1,200 tokens: many small samples.
/// - `high-res`: document and chart understanding: 85% one image of 48 to 64 patches a side
///   (2,304 to 4,096 tokens) with 128 to 2,048 text tokens; 15% text of 64 to 4,200 tokens. The
///   image-dominated mix on which the 2D packer falls to about 66% efficiency.
/// - `text-only`: no images: 64 to 6,000 tokens, one to four documents (an LLM-only stream).
///
/// Throws `errc::invalid_argument` listing the known names for an unknown one.
[[nodiscard]] inline workload workload_preset(std::string_view name) {
  workload w;
  w.name = std::string(name);
  if (name == "vlm-pretrain") {
    w.description = "vision-language pretraining mix: text, single-image, interleaved, heavy tail";
    w.kinds = {
        {"caption", 40, 1, 1, {{1, 24, 40}, {1, 40, 56}}, {{1, 16, 256}}, 1, 1},
        {"image-qa", 15, 1, 1, {{1, 24, 48}}, {{1, 256, 2048}}, 1, 1},
        {"interleaved", 20, 2, 4, {{1, 16, 32}}, {{1, 512, 2048}}, 1, 1},
        {"text-only", 15, 0, 0, {}, {{8, 64, 1200}, {7, 1200, 4200}}, 1, 3},
        {"high-res", 5, 1, 1, {{1, 48, 64}}, {{1, 16, 512}}, 1, 1},
        {"many-images", 5, 6, 12, {{1, 12, 20}}, {{1, 64, 512}}, 1, 1},
    };
  } else if (name == "captioning") {
    w.description = "short captions on single low- to medium-resolution images";
    w.kinds = {
        {"caption", 90, 1, 1, {{1, 8, 16}, {1, 16, 32}}, {{1, 8, 256}}, 1, 1},
        {"text-only", 10, 0, 0, {}, {{1, 64, 1200}}, 1, 1},
    };
  } else if (name == "high-res") {
    w.description = "document and chart understanding: single high-resolution images";
    w.kinds = {
        {"document", 85, 1, 1, {{1, 48, 64}}, {{1, 128, 2048}}, 1, 1},
        {"text-only", 15, 0, 0, {}, {{1, 64, 4200}}, 1, 2},
    };
  } else if (name == "text-only") {
    w.description = "text only: an LLM pretraining stream";
    w.kinds = {{"text-only", 1, 0, 0, {}, {{3, 64, 1200}, {2, 1200, 6000}}, 1, 4}};
  } else {
    std::string known;
    for (const auto& n : workload_preset_names()) {
      known += (known.empty() ? "" : ", ") + n;
    }
    PACKSWAP_FAIL(errc::invalid_argument,
                  "unknown workload preset '" << name << "' (known: " << known << ")");
  }
  return w;
}

} // namespace packswap
