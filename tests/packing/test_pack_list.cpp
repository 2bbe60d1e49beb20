#include <packswap/packing/pack_list.hpp>

#include <doctest/doctest.h>

#include <string>

using packswap::pack_list;

TEST_CASE("a pack_list keeps packs in closing order and never stores an empty pack") {
  pack_list packs(100, 50);
  CHECK(packs.capacity() == 100);
  CHECK(packs.image_budget() == 50);
  packs.close();
  CHECK(packs.empty());
  packs.add(3, 60, 20);
  packs.add(1, 40, 30);
  packs.close();
  packs.add(0, 10, 0);
  packs.close();
  packs.close();
  packs.skip(2);
  REQUIRE(packs.size() == 2);
  CHECK(packs.samples(0).size() == 2);
  CHECK(packs.samples(0)[0] == 3);
  CHECK(packs.samples(0)[1] == 1);
  CHECK(packs.tokens(0) == 100);
  CHECK(packs.image_tokens(0) == 50);
  CHECK(packs.samples(1)[0] == 0);
  CHECK(packs.total_tokens() == 110);
  CHECK(packs.total_image_tokens() == 50);
  CHECK(packs.total_samples() == 3);
  REQUIRE(packs.skipped().size() == 1);
  CHECK(packs.skipped()[0] == 2);
}

TEST_CASE("a pack_list refuses a sample that overflows the open pack's capacity or budget") {
  pack_list packs(100, 50);
  packs.add(0, 70, 40);
  CHECK_THROWS_WITH_AS(packs.add(1, 31, 0),
                       "packswap [invalid_argument]: sample 1 has 31 tokens, pack 0 has room for "
                       "30 of 100",
                       packswap::error);
  CHECK_THROWS_WITH_AS(packs.add(2, 20, 11),
                       "packswap [invalid_argument]: sample 2 has 11 image tokens, pack 0 has "
                       "room for 10 of the budget 50",
                       packswap::error);
  CHECK_THROWS_AS(packs.add(3, 0, 0), packswap::error);
  CHECK_THROWS_AS(packs.add(3, 5, 6), packswap::error);
  packs.add(4, 30, 10);
  packs.close();
  CHECK(packs.tokens(0) == 100);
}

TEST_CASE("a pack_list needs a positive capacity and a non-negative budget") {
  CHECK_THROWS_WITH_AS(pack_list(0),
                       "packswap [invalid_argument]: capacity is 0 tokens, must be "
                       "at least 1",
                       packswap::error);
  CHECK_THROWS_AS(pack_list(10, -1), packswap::error);
  CHECK(pack_list().image_budget() == pack_list::no_budget);
}
