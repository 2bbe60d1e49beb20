#include <packswap/cost/features.hpp>
#include <packswap/error.hpp>
#include <packswap/simulate/compute_model.hpp>

#include <doctest/doctest.h>

using packswap::compute_model;
using packswap::llm_model;
using packswap::pack_features;

TEST_CASE("the LLM costs every pack the same by default, full or not") {
  pack_features full;
  full.tokens = 8192;
  pack_features two_thirds;
  two_thirds.tokens = 5400;
  CHECK(llm_model{}(full) == 1'000'000);
  CHECK(llm_model{}(two_thirds) == 1'000'000);
}

TEST_CASE("LLM per-token and attention terms add femtoseconds, rounded to microseconds") {
  pack_features f;
  f.tokens = 1000;
  f.document_tokens_sq = 3 * 500 * 500; // three documents of 500 tokens
  llm_model llm;
  llm.pack_us = 10;
  llm.per_token_fs = 2'000'000'000; // 2 us per token
  llm.attention_fs = 1'000'000;     // 1 ns per length^2
  // 10 + 2,000 + 750 us
  CHECK(llm(f) == 2760);
}

TEST_CASE("compute time is ViT forward and backward plus the LLM's") {
  pack_features f;
  f.tokens = 8192;
  f.images = 2;
  f.image_tokens = 3000;
  // ViT: 180 ms + 0.84 ms x 3000 = 2,700 ms; LLM: 1,000 ms.
  CHECK(compute_model{}(f) == 3'700'000);
  pack_features text;
  text.tokens = 8192;
  CHECK(compute_model{}(text) == 1'000'000);
}

TEST_CASE("a negative LLM parameter is an error naming it") {
  llm_model llm;
  llm.pack_us = -1;
  CHECK_THROWS_WITH_AS(llm(pack_features{}), doctest::Contains("pack_us -1"), packswap::error);
}
