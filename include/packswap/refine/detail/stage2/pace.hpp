#pragma once

#include "packswap/detail/products.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace packswap::detail::stage2 {

/// From this many levels a repair step reads the level tables of the roomiest ranks, O(m k) each,
/// and takes the first full fix (see repair_phase); in large batches its pace is then judged
/// from the first steps (see repair_pace::hopeless).
inline constexpr std::size_t bold_from_levels = 64;

/// The repair's judge (stage 2, phase 4): whether an attempt's repairs, at the pace they go,
/// should give up before the work bound (`hopeless`: the answer would be the fallback's anyway),
/// and whether they are short of work (`hurried`: then each step takes the first full fix it
/// finds). It reads counts only, the work units spent and the integer load excess left, never a
/// clock, so every rank gives up, or hurries, at the same step.
///
/// The rounds of one attempt are judged together: `start_attempt()` when the attempt begins,
/// `begin(st)` when each of its repair runs does (the first records the work and the total excess
/// the pace is counted from), `step_done()` after each step. O(1) per call.
class repair_pace {
 public:
  // A new attempt: nothing counted yet.
  void start_attempt() { *this = repair_pace{}; }

  // A repair run of the attempt begins; the first one sets where the pace is counted from.
  void begin(const state& st) {
    if (start_work_ < 0) {
      start_work_ = st.work;
      start_excess_ = st.total_excess;
    }
  }

  // A step is done: a step on crowded levels (which need not lower the excess) adds its work to
  // what the pace leaves out; a step on load excess counts as one.
  void step_done(bool level_step, std::int64_t work) {
    if (level_step) {
      level_work_ += work;
    } else {
      ++load_steps_;
    }
  }

  // Whether the attempt is short of work, judged now; once it is, it stays so.
  bool hurry(const state& st) {
    hurried_ = hurried_ || short_of_work(st);
    return hurried_;
  }
  bool hurried() const { return hurried_; }

  // Whether the attempt's repairs, at the pace they have lowered the total excess since its first
  // repair began, cannot end it within the work left, even at twice that pace: then the work left
  // would be spent for nothing, as the answer would be the fallback anyway. The pace counts the
  // work of the steps on load excess only (the steps that fix crowded levels come first and need
  // not lower it). It is judged once those steps number at least judged_after_steps and have spent
  // a part (1 / judged_after_part) of the allowance the attempt started with: with many ranks to
  // repair it mostly slows as the ranks left get harder, while a few ranks may take many small
  // steps before a large one. With many levels (bold_from_levels) a step reads O(m k) and an
  // attempt may take only tens of them, so in batches of judged_early_from packs or more the pace
  // is judged from the 4th step. In batches that large it is also judged over the recent work alone
  // (`recent_`), at that pace without the factor two: with many levels such repairs typically shed
  // most of the excess in their first steps and then stall; with fewer a repair may slow steadily,
  // each step shedding less than the one before (bimodal costs at dp 1,024 x ga 16 need up to eight
  // times the bound, and at eps = 0 then move more bytes than the fallback: seeds 1 and 2, 0.692
  // and 0.653 of Karmarkar-Karp's against 0.679 and 0.639), which the pace since the start judges
  // only late, and the recent pace of a repair that slows overstates the pace to come. (With the
  // factor two those bimodal batches reported 0.69-0.95 M units of work, the fallback's included,
  // instead of 0.53-0.71 M; over the stress set's batches from 16,384 packs at ga 16 and below and
  // the benchmark workloads', the one search it let succeed, at the bound's edge, moved 0.010 of
  // Karmarkar-Karp's bytes fewer than the fallback.) From judged_early_from packs the allowance,
  // 0.79 M units or more, costs 4-7 ms where a search spends it all, more than twice the benchmark
  // batch's solve: judged so from 8,192 packs rather than 16,384, 24 searches of the stress grid at
  // 8,192 packs end at 0.15-0.98 of the work (`high-res` 8 x 1,024 at eps 0, seed 3: 7.1 ms ->
  // 3.6 ms), and of the twelve whose plans change, seven move fewer bytes (`bimodal` 8 x 1,024,
  // seed 1, a search that had succeeded at the bound's edge: 0.562 of Karmarkar-Karp's bytes
  // instead of 0.935) and five more, by 0.034 at most. (In smaller batches the bound's constant
  // makes most of the allowance, the whole of it costs a few milliseconds, and the later attempts'
  // chained repairs often succeed late: there, judging early lost more bytes than it saved time;
  // from 4,096 packs, `high-res` 64 x 64 at eps 0 moved 0.503 instead of 0.485.) With many levels
  // and fewer than short_window_below packs the recent window is the last 1/32 to 2/32 of the
  // allowance (`samples_short`) instead of 3/32 to 4/32: those repairs stall within a few steps of
  // thousands of units each, and the longer window kept paying for them (on the stress set at
  // 16,384 packs, 24 searches give up sooner for the same fallback: `bimodal` 256 x 64 at eps 0
  // after 0.29 M units instead of 0.80 M, `pareto` 16 x 1,024 0.37 M instead of 0.79 M; three that
  // succeeded late take the fallback, moving 0.470 of Karmarkar-Karp's bytes instead of 0.487,
  // 0.722 instead of 0.723 and 0.234 instead of 0.231; at 32,768 packs 29 of 432 give up sooner,
  // 27.2 M units in all -> 21.5 M with the five below, and of five late successes three `bimodal`
  // ones move 0.013-0.015 more, `bimodal` 32 x 1,024 seed 1 0.513 instead of 0.498 in 1.29 times
  // the time). In larger batches the fallback costs as much as the search left: there a search that
  // succeeds late (`bimodal` 1,024 x 256 at eps 0.001, 262,144 packs) took 1.47 times as long when
  // it gave up. Integers and work counts only: every rank gives up at the same step. O(1).
  bool hopeless(const state& st) {
    const bool large = st.n >= judged_early_from;
    const bool judge_early = large && st.k >= bold_from_levels;
    const progress now = measure(st);
    const std::int64_t allowance = judged_limit(st) - start_work_;
    if (load_steps_ < (judge_early ? judged_early_after_steps : judged_after_steps) ||
        now.spent < allowance / judged_after_part || now.left <= 0) {
      return false;
    }
    if (now.done <= 0) {
      return true;
    }
    const std::size_t window = judge_early && st.n < short_window_below ? recent_pace::samples_short
                                                                        : recent_pace::samples;
    if (large && recent_.hopeless(now.spent, st.total_excess, allowance, now.left, window)) {
      return true;
    }
    // total_excess / (done / spent) > 2 left, as products (128 bits).
    return compare_products(st.total_excess, now.spent, now.done, 2 * now.left) > 0;
  }

 private:
  // Whether the attempt's repairs, at the pace they have lowered the total excess since its
  // first repair began, would need more than half the work left (judged as hopeless() is, from
  // the same step). From then on, for the rest of the attempt, a step reads no partner after one
  // that gave a full fix, as it always does with 64 levels or more: with fewer levels each
  // partner costs O(k scan_limit), and reading all eight finds fixes that move a few thousandths
  // of Karmarkar-Karp's bytes fewer, which is worth its work only while the work lasts. On the
  // stress set it changes only batches at ga 16 whose repairs take a step for most ranks
  // (`multiples`, costs from 15 values: 8.4-8.7 million units at 262,144 packs, and up to 41
  // million, past the bound, at 1,048,576; `ties`, `high-res`): 19-48% fewer units than reading
  // every partner, moved bytes within 0.003 of Karmarkar-Karp's of what that moves, and four
  // `multiples` batches that would end at the bound end within it, moving 0.25 instead of the
  // fallback's 0.28-0.38. Nor does such a step search the cost index, once a partner gave a
  // full fix, for one moving fewer bytes: on the stress set 17-44% fewer units again (`multiples`
  // 6.6-7.0 million -> 5.3-5.7 million at 262,144 packs, 21-31 million -> 15-26 million at
  // 1,048,576; `ties` 1.9 -> 1.1 million and 7.6 -> 4.3 million), moved bytes within 0.002 of
  // Karmarkar-Karp's of what the search moves. Integers and work counts only. O(1).
  bool short_of_work(const state& st) const {
    const progress now = measure(st);
    if (load_steps_ < judged_after_steps || now.done <= 0 || now.left <= 0) {
      return false;
    }
    return compare_products(st.total_excess, 2 * now.spent, now.done, now.left) > 0;
  }

  // Where the attempt's repairs stand, as both judges read it: the work of its steps on load
  // excess (`spent`), the work left before the bound, and the excess removed since its first
  // repair began (`done`).
  struct progress {
    std::int64_t spent = 0;
    std::int64_t left = 0;
    std::int64_t done = 0;
  };
  progress measure(const state& st) const {
    return {st.work - start_work_ - level_work_, judged_limit(st) - st.work,
            start_excess_ - st.total_excess};
  }

  // The work limit both judges read: the search's, and the work kept back for the fallback after
  // it (state::work_reserved). The judges were measured against the whole bound: against the
  // search's part alone, two searches of the benchmark workloads (`high-res` 1,024 x 16 at eps 0,
  // seeds 57 and 84) that succeed after about 0.5 M units gave up, moving 0.58-0.59 of
  // Karmarkar-Karp's bytes instead of 0.47-0.48. Read so, a search runs as it did while its work
  // stays below the search's limit. O(1).
  static std::int64_t judged_limit(const state& st) {
    return st.work_limit > std::numeric_limits<std::int64_t>::max() - st.work_reserved
               ? std::numeric_limits<std::int64_t>::max()
               : st.work_limit + st.work_reserved;
  }

  std::int64_t start_work_ = -1;  // work when the attempt's first repair began
  std::int64_t start_excess_ = 0; // and the total excess then
  std::int64_t level_work_ = 0;   // work of the attempt's steps on crowded levels
  std::int64_t load_steps_ = 0;   // and its steps on load excess
  bool hurried_ = false;          // see short_of_work()
  static constexpr std::int64_t judged_after_part = 16;
  static constexpr std::int64_t judged_after_steps = 256;
  static constexpr std::int64_t judged_early_after_steps = 4;
  static constexpr std::size_t judged_early_from = 8192;   // packs
  static constexpr std::size_t short_window_below = 65536; // packs; see hopeless()
  // The recent pace (see hopeless()): the total excess sampled once per 1/32 of the allowance of
  // work, judged from the oldest of the last `window` samples to now: `samples` of them, the last
  // 3/32 to 4/32 of the allowance, or `samples_short`, the last 1/32 to 2/32.
  struct recent_pace {
    static constexpr std::size_t samples = 4;
    static constexpr std::size_t samples_short = 2; // see hopeless()
    std::int64_t spent[samples] = {};
    std::int64_t excess[samples] = {};
    std::size_t taken = 0;
    // Samples (spent, now) and tells whether the excess cannot end within `left` at the pace of
    // the window: the oldest sample kept to now.
    bool hopeless(std::int64_t work, std::int64_t now, std::int64_t allowance, std::int64_t left,
                  std::size_t window) {
      const std::int64_t every = std::max<std::int64_t>(1, allowance / 32);
      if (taken == 0 || work >= spent[(taken - 1) % samples] + every) {
        spent[taken % samples] = work;
        excess[taken % samples] = now;
        ++taken;
      }
      if (taken < window) {
        return false;
      }
      const std::size_t oldest = (taken - window) % samples;
      const std::int64_t done = excess[oldest] - now;
      const std::int64_t over = work - spent[oldest];
      return over > 0 && (done <= 0 || compare_products(now, over, done, left) > 0);
    }
  };
  recent_pace recent_;
};

} // namespace packswap::detail::stage2
