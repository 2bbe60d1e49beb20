// The repair's judge (refine/detail/stage2/pace.hpp): when an attempt gives up before the work
// bound, and when it hurries, from work counts and integer excess alone.
#include <packswap/refine/detail/stage2/pace.hpp>
#include <packswap/refine/detail/stage2/state.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>

using namespace packswap::detail::stage2;

namespace {

// One attempt's repair, judged as repair_phase::run judges it: before each step. Steps on load
// excess spend `work` units each, and the total excess after step i is excess(i).
struct repair_run {
  state st;
  repair_pace pace;
  std::int64_t work = 1000;
  std::function<std::int64_t(int)> excess = [](int) { return std::int64_t{1000}; };
  int hurried_at = -1; // the first step judged short of work

  explicit repair_run(std::size_t packs = 1024, std::size_t levels = 16) {
    st.n = packs;
    st.k = levels;
    st.work_limit = 1'000'000;
  }

  // A new attempt, with nothing spent.
  void start() {
    st.work = 0;
    st.total_excess = excess(0);
    hurried_at = -1;
    pace.start_attempt();
    pace.begin(st);
  }

  // Step i, done: on load excess (the excess becomes excess(i + 1)) or on crowded levels.
  void step(int i, bool level_step = false) {
    if (pace.hurry(st) && hurried_at < 0) {
      hurried_at = i;
    }
    st.work += work;
    pace.step_done(level_step, work);
    if (!level_step) {
      st.total_excess = excess(i + 1);
    }
  }

  // The step at which the judge gives up within `steps` steps, or -1.
  int first_hopeless(int steps = 800) {
    start();
    for (int i = 0; i < steps; ++i) {
      if (pace.hopeless(st)) {
        return i;
      }
      step(i);
    }
    return -1;
  }
};

// Fast until step 200 (400 per step from 100,000), then 1 per step: a repair that stalls.
std::int64_t stalls(int i) {
  return i <= 200 ? 100'000 - 400 * i : 20'000 - (i - 200);
}

} // namespace

TEST_CASE("pace: no judgement before 256 steps on load excess and 1/16 of the allowance") {
  repair_run run; // no progress at all
  CHECK(run.first_hopeless() == 256);
  run.work = 100; // 256 steps spend 25,600 units, under 1,000,000 / 16 = 62,500
  CHECK(run.first_hopeless() == 625);
}

TEST_CASE("pace: gives up when even twice the pace so far would not end the excess in time") {
  repair_run run;
  // 256 steps, 256,000 units, 744,000 left: 512 of 1,000 removed, and the 488 left need about
  // 244,000 more at that pace. Not hopeless.
  run.excess = [](int i) { return i < 256 ? std::int64_t{1000} - 2 * i : std::int64_t{488}; };
  CHECK(run.first_hopeless(300) == -1);
  // 100 of 1,000 removed: 900 left needs 2,304,000 at that pace, more than twice 744,000.
  run.excess = [](int i) { return i < 256 ? std::int64_t{1000} - i * 100 / 256 : 900; };
  CHECK(run.first_hopeless(300) == 256);
}

TEST_CASE("pace: steps on crowded levels do not count toward the pace") {
  repair_run run; // no progress at all
  run.start();
  for (int i = 0; i < 400; ++i) {
    CHECK_FALSE(run.pace.hopeless(run.st)); // no step on load excess yet: never judged
    run.step(i, true);
  }
  // The level steps' 400,000 units are left out: 256 load steps of 100 units (25,600) stay
  // under 1/16 of the allowance, so even no progress at all is not judged.
  run.work = 100;
  for (int i = 400; i < 656; ++i) {
    CHECK_FALSE(run.pace.hopeless(run.st));
    run.step(i);
  }
  CHECK_FALSE(run.pace.hopeless(run.st));
}

TEST_CASE("pace: large batches with many levels are judged from the 4th step") {
  repair_run run(8192, bold_from_levels);
  CHECK(run.first_hopeless() == 63); // the 4th step passed; 63,000 units >= 62,500
  run.st.k = bold_from_levels - 1;
  CHECK(run.first_hopeless() == 256);
  run.st.n = 8191;
  run.st.k = bold_from_levels;
  CHECK(run.first_hopeless() == 256);
}

TEST_CASE("pace: large batches are judged over the recent work too") {
  // The pace since the start (80,000 removed in 200,000 units) would carry on; the recent one
  // (1 per 1,000 units) would not. Samples every 1/32 of the allowance, 31,250 units, from step
  // 256: at 256, 288, 320 and 352 the window is full and the recent pace ends the search.
  repair_run run(8192);
  run.excess = stalls;
  CHECK(run.first_hopeless() == 352);
  // A smaller batch is judged by the pace since the start alone: not within 800 steps.
  run.st.n = 8191;
  CHECK(run.first_hopeless() == -1);
}

TEST_CASE("pace: short of work once the pace would need more than half the work left") {
  repair_run run;
  run.excess = stalls;
  CHECK(run.first_hopeless() == -1);
  // 2 x excess x spent > removed x left: first at step 674 (19,526 x 1,348,000 > 80,474 x
  // 326,000; at 673, 19,527 x 1,346,000 < 80,473 x 327,000), and it stays so.
  CHECK(run.hurried_at == 674);
  CHECK(run.pace.hurry(run.st));
  run.st.total_excess = 0; // all removed: no longer short of work, but hurried stays
  CHECK(run.pace.hurry(run.st));
  CHECK(run.pace.hurried());
  run.start(); // a new attempt starts afresh
  CHECK_FALSE(run.pace.hurried());
}
