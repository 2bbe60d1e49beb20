#include <packswap/cost/calibrate.hpp>
#include <packswap/cost/features.hpp>
#include <packswap/detail/prng.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/workload.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using packswap::calibrate;
using packswap::cost_model;
using packswap::cost_term;
using packswap::pack_features;
using packswap::pack_timing;

namespace {

// Real packs of the default preset at several capacities, so tokens and documents vary too.
std::vector<pack_features> sample_packs() {
  std::vector<pack_features> out;
  const auto set = packswap::generate(packswap::workload_preset("vlm-pretrain"), 6'000, 12);
  for (const std::int64_t capacity : {6000, 8192, 12000}) {
    const auto packs = packswap::greedy_packer{capacity, 256}(set);
    const auto f = packswap::features_of(set, packs);
    out.insert(out.end(), f.begin(), f.end());
  }
  return out;
}

// Measured time: the exact model times (1 + noise), noise uniform in +-`percent`%.
std::vector<pack_timing> measure(const std::vector<pack_features>& packs, const cost_model& truth,
                                 std::int64_t percent, std::uint64_t seed) {
  packswap::prng rng(seed);
  std::vector<pack_timing> rows;
  for (const auto& f : packs) {
    const double noise = static_cast<double>(rng.uniform(-percent * 1000, percent * 1000)) / 1e5;
    rows.push_back({f, static_cast<double>(truth(f)) * (1.0 + noise)});
  }
  return rows;
}

std::string error_of(const std::vector<pack_timing>& rows, std::initializer_list<cost_term> t) {
  try {
    (void)calibrate(rows, t);
  } catch (const packswap::error& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("calibration recovers known coefficients from noisy measurements") {
  cost_model truth;
  truth.pack_fs = 20'000'000'000'000;       // 20 ms
  truth.vit_fixed_fs = 180'000'000'000'000; // 180 ms
  truth.vit_per_image_token_fs = 840'000'000'000;
  truth.vit_attention_fs = 60'000'000;      // 60 ns per image token^2
  truth.llm_per_token_fs = 150'000'000'000; // 0.15 ms per token
  truth.llm_attention_fs = 4'000'000;       // 4 ns per document token^2
  const auto packs = sample_packs();
  REQUIRE(packs.size() > 1500);
  const auto rows = measure(packs, truth, 2, 1);
  const auto fit = calibrate(rows);
  CHECK(fit.zeroed.empty());
  const auto close = [](std::int64_t got, std::int64_t want, double tolerance) {
    return std::abs(static_cast<double>(got - want)) <= tolerance * static_cast<double>(want);
  };
  CHECK(close(fit.model.vit_per_image_token_fs, truth.vit_per_image_token_fs, 0.02));
  CHECK(close(fit.model.llm_per_token_fs, truth.llm_per_token_fs, 0.05));
  CHECK(close(fit.model.vit_fixed_fs, truth.vit_fixed_fs, 0.10));
  CHECK(close(fit.model.vit_attention_fs, truth.vit_attention_fs, 0.10));
  // The weakest term (about 1.5% of a pack's cost, below the noise of one measurement).
  CHECK(close(fit.model.llm_attention_fs, truth.llm_attention_fs, 0.25));
  CHECK(fit.r_squared > 0.99);
  // Least squares fits the noisy rows at least as well as the true coefficients do (up to the
  // rounding of its coefficients to whole femtoseconds).
  double truth_ss = 0.0;
  for (const auto& r : rows) {
    const double e = static_cast<double>(truth(r.features)) - r.microseconds;
    truth_ss += e * e;
  }
  CHECK(fit.rms_error_us <= std::sqrt(truth_ss / static_cast<double>(rows.size())) + 1.0);
  // Exact measurements are fitted to within rounding.
  const auto exact = calibrate(measure(packs, truth, 0, 1));
  CHECK(exact.max_error_us <= 2.0);
  CHECK(close(exact.model.pack_fs, truth.pack_fs, 1e-3));
}

TEST_CASE("calibration fits only the chosen terms") {
  const auto packs = sample_packs();
  const cost_model truth; // the ViT defaults
  const auto fit = calibrate(measure(packs, truth, 1, 2),
                             {cost_term::vit_fixed, cost_term::vit_per_image_token});
  CHECK(fit.model.pack_fs == 0);
  CHECK(fit.model.llm_per_token_fs == 0);
  CHECK(std::abs(static_cast<double>(fit.model.vit_per_image_token_fs) - 840e9) < 0.01 * 840e9);
  CHECK(std::abs(static_cast<double>(fit.model.vit_fixed_fs) - 180e12) < 0.05 * 180e12);
}

TEST_CASE("a term the fit makes negative is fixed at zero and the rest refitted") {
  const auto packs = sample_packs();
  cost_model truth; // no LLM terms at all
  truth.pack_fs = 100'000'000'000'000;
  auto rows = measure(packs, truth, 0, 3);
  for (auto& r : rows) {
    r.microseconds -= 4e-3 * static_cast<double>(r.features.tokens); // llm_per_token < 0
  }
  const auto fit = calibrate(rows, {cost_term::pack, cost_term::vit_fixed,
                                    cost_term::vit_per_image_token, cost_term::llm_per_token});
  REQUIRE(fit.zeroed.size() == 1);
  CHECK(fit.zeroed[0] == cost_term::llm_per_token);
  CHECK(fit.model.llm_per_token_fs == 0);
  CHECK(fit.model.vit_per_image_token_fs > 0);
}

TEST_CASE("measurements that cannot tell terms apart are refused naming the term") {
  // Every pack has images: 'vit_fixed' is the same column as 'pack'.
  std::vector<pack_timing> rows;
  for (int i = 1; i <= 20; ++i) {
    pack_features f;
    f.tokens = 8000 + i;
    f.images = 1;
    f.image_tokens = 100 * i;
    rows.push_back({f, 1000.0 + 3.0 * i});
  }
  CHECK(error_of(rows, {cost_term::pack, cost_term::vit_fixed})
            .find("term 'vit_fixed' is (nearly) a combination of the terms before it") !=
        std::string::npos);
  CHECK(error_of(rows, {cost_term::vit_attention}) ==
        "packswap [invalid_argument]: term 'vit_attention' is zero in every measurement, so it "
        "cannot be fitted");
  CHECK(error_of(rows, {cost_term::pack, cost_term::pack}).find("listed twice") !=
        std::string::npos);
  CHECK(error_of(rows, {}) == "packswap [invalid_argument]: no cost term to fit");
  CHECK(error_of({rows[0]}, {cost_term::pack, cost_term::llm_per_token}) ==
        "packswap [invalid_argument]: 1 measurements cannot fit 2 terms");
  rows[4].microseconds = -1.0;
  CHECK(error_of(rows, {cost_term::pack}) ==
        "packswap [invalid_argument]: measurement 4 took -1 us, must be finite and >= 0");
  rows[4].microseconds = std::nan("");
  CHECK(error_of(rows, {cost_term::pack}).find("measurement 4 took nan us") != std::string::npos);
}
