#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/digest.hpp"
#include "packswap/detail/prefetch.hpp"
#include "packswap/detail/select.hpp"
#include "packswap/detail/step_maxima.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

namespace packswap {

/// One pack crossing between two ranks. In a send list `peer` is the receiver, in a receive list
/// the sender.
struct transfer {
  std::int32_t pack = 0;  ///< pack id (its index in the gathered metadata)
  std::int32_t peer = 0;  ///< the other rank
  std::int64_t bytes = 0; ///< payload size

  /// Same pack, peer and size.
  [[nodiscard]] friend constexpr bool operator==(const transfer& x, const transfer& y) noexcept {
    return x.pack == y.pack && x.peer == y.peer && x.bytes == y.bytes;
  }
};

class plan;

namespace detail {
struct plan_scratch;
struct plan_builder;
inline void build_plan_into(span<const pack_meta> packs, const shape& s, const assignment& a,
                            std::int32_t first_rank, std::int32_t last_rank, plan_scratch& ws,
                            plan& out);
inline plan build_plan(span<const pack_meta> packs, const shape& s, const assignment& a,
                       std::int32_t first_rank, std::int32_t last_rank);
} // namespace detail

/// What ranks do at every micro-step, derived from an assignment.
///
/// For rank r and micro-step m: `compute(r, m)` lists the packs r computes (ascending pack id);
/// `keep(r, m)` those among them that r's own loader produced (used in place, never copied);
/// `receives(r, m)` the others, each with the rank it comes from; `sends(r, m)` the packs of r's
/// loader that another rank computes at micro-step m. Send and receive lists are sorted by
/// (peer, pack id), so both ends of every link list the same packs in the same order.
///
/// A plan holds the lists of a range of ranks, `[first_rank(), last_rank())`: all of them
/// (`make_plan(packs, shape, a)`), or only the caller's (`make_plan(packs, shape, a, rank)`,
/// which is all a rank needs and costs one linear scan). Asking for a rank outside the range
/// throws `errc::invalid_argument`.
///
/// A plan is immutable and owns its storage; the spans it returns live as long as the plan.
class plan {
 public:
  plan() = default;

  /// The batch shape this plan is for.
  [[nodiscard]] const packswap::shape& batch_shape() const noexcept { return shape_; }
  /// The first rank whose lists this plan holds.
  [[nodiscard]] std::int32_t first_rank() const noexcept { return first_; }
  /// One past the last rank whose lists this plan holds.
  [[nodiscard]] std::int32_t last_rank() const noexcept { return last_; }

  /// The packs `rank` computes at micro-step `step`, ascending pack id (`mbs` of them).
  [[nodiscard]] span<const std::int32_t> compute(std::int32_t rank, std::int32_t step) const {
    const auto c = cell_index(rank, step);
    const auto mbs = static_cast<std::size_t>(shape_.mbs);
    return span<const std::int32_t>(compute_.data() + c * mbs, mbs);
  }
  /// Those of `compute(rank, step)` that `rank`'s own loader produced: used in place.
  [[nodiscard]] span<const std::int32_t> keep(std::int32_t rank, std::int32_t step) const {
    const auto c = cell_index(rank, step);
    return part(keep_, keep_off_[c], keep_off_[c + 1]);
  }
  /// The packs of `rank`'s loader that another rank computes at micro-step `step`, each with
  /// its receiver, by (peer, pack id).
  [[nodiscard]] span<const transfer> sends(std::int32_t rank, std::int32_t step) const {
    const auto c = cell_index(rank, step);
    return part(send_, send_off_[c], send_off_[c + 1]);
  }
  /// The packs `rank` computes at micro-step `step` that come from other ranks, each with its
  /// sender, by (peer, pack id).
  [[nodiscard]] span<const transfer> receives(std::int32_t rank, std::int32_t step) const {
    const auto c = cell_index(rank, step);
    return part(recv_, recv_off(c), recv_off(c + 1));
  }

  /// Everything rank `rank` sends, micro-step by micro-step (each step's part sorted by (peer,
  /// pack)).
  [[nodiscard]] span<const transfer> sends(std::int32_t rank) const {
    const auto c = rank_cells(rank);
    return part(send_, send_off_[c], send_off_[c + ga()]);
  }
  /// Everything rank `rank` receives, micro-step by micro-step.
  [[nodiscard]] span<const transfer> receives(std::int32_t rank) const {
    const auto c = rank_cells(rank);
    return part(recv_, recv_off(c), recv_off(c + ga()));
  }

  /// Bytes rank `rank` receives for micro-step `step`.
  [[nodiscard]] std::int64_t receive_bytes(std::int32_t rank, std::int32_t step) const {
    std::int64_t sum = 0;
    for (const auto& t : receives(rank, step)) {
      sum += t.bytes;
    }
    return sum;
  }

  /// Bytes rank `rank` sends for micro-step `step`.
  [[nodiscard]] std::int64_t send_bytes(std::int32_t rank, std::int32_t step) const {
    std::int64_t sum = 0;
    for (const auto& t : sends(rank, step)) {
      sum += t.bytes;
    }
    return sum;
  }

  /// A digest of the lists this plan holds (and of its shape and rank range): equal wherever the
  /// same plan was built. To compare across ranks that each built only their own plan, digest
  /// the assignment instead (`packswap::digest(const assignment&)`).
  [[nodiscard]] std::uint64_t digest() const noexcept {
    detail::digest d;
    d.i64(shape_.dp);
    d.i64(shape_.ga);
    d.i64(shape_.mbs);
    d.i64(first_);
    d.i64(last_);
    for (const auto x : compute_) {
      d.i64(x);
    }
    for (const auto x : keep_) {
      d.i64(x);
    }
    for (const auto& t : send_) {
      d.i64(t.pack);
      d.i64(t.peer);
      d.i64(t.bytes);
    }
    for (const auto& t : recv_) {
      d.i64(t.pack);
      d.i64(t.peer);
      d.i64(t.bytes);
    }
    return d.value();
  }

  friend void detail::build_plan_into(span<const pack_meta> packs, const shape& s,
                                      const assignment& a, std::int32_t first_rank,
                                      std::int32_t last_rank, detail::plan_scratch& ws, plan& out);
  friend struct detail::plan_builder;

 private:
  std::size_t ga() const { return static_cast<std::size_t>(shape_.ga); }

  // The index of cell (rank, step) among the plan's cells (its ranks' micro-steps in order).
  std::size_t cell_index(std::int32_t rank, std::int32_t step) const {
    PACKSWAP_EXPECTS(
        rank >= first_ && rank < last_ && step >= 0 && step < shape_.ga, errc::invalid_argument,
        "(rank " << rank << ", micro-step " << step << ") is outside this plan: ranks [" << first_
                 << ", " << last_ << "), ga=" << shape_.ga);
    return static_cast<std::size_t>(rank - first_) * ga() + static_cast<std::size_t>(step);
  }

  // The index of rank's first cell.
  std::size_t rank_cells(std::int32_t rank) const {
    PACKSWAP_EXPECTS(rank >= first_ && rank < last_, errc::invalid_argument,
                     "rank " << rank << " is outside this plan: ranks [" << first_ << ", " << last_
                             << ")");
    return static_cast<std::size_t>(rank - first_) * ga();
  }

  // Where cell c's receives begin: every cell computes mbs packs, each kept or received, so
  // the receives before it are its cells' packs less those kept.
  std::int64_t recv_off(std::size_t c) const {
    return static_cast<std::int64_t>(c) * shape_.mbs - keep_off_[c];
  }

  template <class T>
  static span<const T> part(const std::vector<T>& data, std::int64_t from, std::int64_t to) {
    return span<const T>(data.data() + from, static_cast<std::size_t>(to - from));
  }

  packswap::shape shape_{};
  std::int32_t first_ = 0;
  std::int32_t last_ = 0;
  // Every cell computes exactly mbs packs: cell c's are compute_[c mbs, (c + 1) mbs). Keep and
  // send lists by offsets per cell (one extra entry at the end); receive offsets follow from the
  // keep offsets (recv_off()).
  std::vector<std::int64_t> keep_off_, send_off_;
  std::vector<std::int32_t> compute_, keep_;
  std::vector<transfer> send_, recv_;
};

namespace detail {

// Turns per-bucket counts (in every entry but the last) into where each bucket ends, and the
// last entry into the total: a pass that then fills the buckets backwards, each entry at
// --end[bucket], leaves each bucket in the pass's order reversed, and every entry at the
// bucket's start.
inline void counts_to_ends(std::vector<std::int64_t>& off) {
  std::int64_t run = 0;
  for (std::size_t i = 0; i + 1 < off.size(); ++i) {
    run += off[i];
    off[i] = run;
  }
  off.back() = run;
}

// A pack that changes rank, in the lists by receiver and by sender that the send and receive lists
// are dealt from: all a list entry needs, so dealing it reads no pack record.
struct plan_move {
  std::int32_t pack, from, to, step;
  std::int64_t bytes;
};

// build_plan_into's working memory, which a kept `solver` reuses from batch to batch.
struct plan_scratch {
  std::vector<std::int64_t> to_end, from_end; // moved packs by receiver / by sender, as ends
  std::vector<std::int32_t> involved;         // packs a partial plan visits
  std::vector<std::int32_t> left, dealt;      // per cell: packs still to place, receives placed
  std::vector<plan_move> by_to, by_from;      // the moved packs by receiver / by sender
};

// The ranks a plan holds, [first, last), and the packs its passes visit: every pack in a plan of
// every rank, else those listed in `involved` (the packs its ranks compute or send). O(1) each.
// The passes take it by value: a copy of their own, which the lists they write cannot alias.
struct plan_scope {
  std::int32_t first = 0, last = 0;
  std::size_t ga = 0;
  std::size_t packs = 0;
  const std::vector<std::int32_t>* involved = nullptr; // null: every pack

  std::size_t cells() const { return static_cast<std::size_t>(last - first) * ga; }
  // One unsigned comparison, tested before from != to: for a rank's own plan it is almost always
  // false, so the branches predict well (whether a pack moved follows no pattern).
  bool held(std::int32_t r) const {
    return static_cast<std::uint32_t>(r - first) < static_cast<std::uint32_t>(last - first);
  }
  // The index of cell (r, step) among the plan's cells.
  std::size_t local(std::int32_t r, std::int32_t step) const {
    return static_cast<std::size_t>(r - first) * ga + static_cast<std::size_t>(step);
  }
  std::size_t visits() const { return involved == nullptr ? packs : involved->size(); }
  std::size_t pack_at(std::size_t v) const {
    return involved == nullptr ? v : static_cast<std::size_t>((*involved)[v]);
  }
};

// The passes that fill a plan's lists (see build_plan_into). Linear: lists are filled in the order
// they must end up in, so nothing is comparison-sorted.
struct plan_builder {
  // Cells ahead whose pack record fill_one_pack_cells fetches.
  static constexpr std::size_t fetch_ahead = 8;

  // The compute, keep and receive lists where cells hold several packs: one pass counts the packs
  // kept per cell, received per sender and sent (count_send), one backwards fills the compute and
  // keep lists and lists the received packs by sender and the sent ones by receiver (stable in
  // id), and one over the list by sender deals it into the receive lists, by cell, which sorts
  // each by (peer, pack). O(visits + cells + dp).
  static void fill_cells(span<const pack_meta> packs, const shape& s, const assignment& a,
                         plan_scope scope, plan_scratch& ws, plan& out) {
    const auto mbs = static_cast<std::size_t>(s.mbs);
    const std::size_t cells = scope.cells();
    const std::size_t visits = scope.visits();
    out.keep_off_.assign(cells + 1, 0);
    auto& from_end = ws.from_end;
    from_end.assign(static_cast<std::size_t>(s.dp) + 1, 0);
    for (std::size_t v = 0; v < visits; ++v) {
      const std::size_t p = scope.pack_at(v);
      const std::int32_t to = a[p].rank;
      const std::int32_t from = packs[p].source_rank;
      if (scope.held(to)) {
        if (from == to) {
          ++out.keep_off_[scope.local(to, a[p].micro_step)];
        } else {
          ++from_end[static_cast<std::size_t>(from)];
        }
      }
      count_send(scope, from, to, a[p].micro_step, ws, out);
    }
    counts_to_ends(out.keep_off_);
    counts_to_ends(from_end);
    start_sends(scope, ws, out);
    out.compute_.resize(cells * mbs);
    out.keep_.resize(static_cast<std::size_t>(out.keep_off_[cells]));
    out.recv_.resize(cells * mbs - out.keep_.size());
    auto& by_from = ws.by_from;
    by_from.resize(out.recv_.size());
    // Packs a cell computes still to come (from the back).
    auto& left = ws.left;
    left.assign(cells, static_cast<std::int32_t>(mbs));
    for (std::size_t v = visits; v-- > 0;) {
      const std::size_t p = scope.pack_at(v);
      const plan_move m{static_cast<std::int32_t>(p), packs[p].source_rank, a[p].rank,
                        a[p].micro_step, packs[p].bytes};
      if (scope.held(m.to)) {
        const auto c = scope.local(m.to, m.step);
        out.compute_[c * mbs + static_cast<std::size_t>(--left[c])] = m.pack;
        if (m.from == m.to) {
          out.keep_[static_cast<std::size_t>(--out.keep_off_[c])] = m.pack;
        } else {
          by_from[static_cast<std::size_t>(--from_end[static_cast<std::size_t>(m.from)])] = m;
        }
      }
      list_send(scope, m, ws);
    }
    auto& dealt = ws.dealt; // receives placed per cell, from its end
    dealt.assign(cells, 0);
    for (std::size_t i = by_from.size(); i-- > 0;) {
      const plan_move& m = by_from[i];
      const auto c = scope.local(m.to, m.step);
      out.recv_[static_cast<std::size_t>(out.recv_off(c + 1) - 1 - dealt[c]++)] =
          transfer{m.pack, m.from, m.bytes};
    }
  }

  // The compute, keep and receive lists where every cell computes one pack (mbs = 1): one pass
  // writes each cell's pack (and counts the packs kept, and the sends), one backwards lists the
  // sent packs by receiver, and one over the cells in order gives each one's pack to the keep list
  // or, with its sender, to the receive list, both then in cell order. Only that last pass reads
  // pack records at random, each fetched a few cells ahead, where fill_cells writes the keep and
  // receive lists at random and deals the receives from a list by sender (a plan of every rank of
  // `bimodal` 65,536 x 16, 1,048,576 packs: 41-42 ms instead of 61-64, medians of the benchmark
  // bench/plan/build.cpp; docs/performance.md). O(visits + cells + dp).
  static void fill_one_pack_cells(span<const pack_meta> packs, const assignment& a,
                                  plan_scope scope, plan_scratch& ws, plan& out) {
    const std::size_t cells = scope.cells();
    const std::size_t visits = scope.visits();
    out.compute_.resize(cells);
    std::size_t kept = 0;
    for (std::size_t v = 0; v < visits; ++v) {
      const std::size_t p = scope.pack_at(v);
      const std::int32_t to = a[p].rank;
      const std::int32_t from = packs[p].source_rank;
      if (scope.held(to)) {
        out.compute_[scope.local(to, a[p].micro_step)] = static_cast<std::int32_t>(p);
        kept += from == to ? 1 : 0;
      }
      count_send(scope, from, to, a[p].micro_step, ws, out);
    }
    start_sends(scope, ws, out);
    for (std::size_t v = visits; v-- > 0;) {
      const std::size_t p = scope.pack_at(v);
      list_send(scope,
                plan_move{static_cast<std::int32_t>(p), packs[p].source_rank, a[p].rank,
                          a[p].micro_step, packs[p].bytes},
                ws);
    }
    out.keep_off_.resize(cells + 1);
    out.keep_.resize(kept);
    out.recv_.resize(cells - kept);
    std::size_t k = 0; // packs kept before cell c
    std::size_t c = 0;
    for (std::int32_t r = scope.first; r < scope.last; ++r) {
      for (std::size_t step = 0; step < scope.ga; ++step, ++c) {
        if (c + fetch_ahead < cells) {
          prefetch(&packs[static_cast<std::size_t>(out.compute_[c + fetch_ahead])]);
        }
        out.keep_off_[c] = static_cast<std::int64_t>(k);
        const std::int32_t p = out.compute_[c];
        const pack_meta& m = packs[static_cast<std::size_t>(p)];
        if (m.source_rank == r) {
          out.keep_[k++] = p;
        } else {
          out.recv_[c - k] = transfer{p, m.source_rank, m.bytes};
        }
      }
    }
    out.keep_off_[cells] = static_cast<std::int64_t>(k);
  }

  // The packs that ranks [scope.first, scope.last) compute or send, into `involved`, by id. One
  // scan of the batch, in a function of its own: written out in build_plan_into, the compiler kept
  // the scan's counter in memory, and a rank's own plan at 262,144 packs took 4 times as long.
  // O(packs).
  static void list_involved(span<const pack_meta> packs, const assignment& a, plan_scope scope,
                            std::vector<std::int32_t>& involved) {
    involved.clear();
    const pack_meta* pk = packs.data();
    const cell* at = a.data();
    for (std::size_t p = 0; p < packs.size(); ++p) {
      const std::int32_t to = at[p].rank;
      const std::int32_t from = pk[p].source_rank;
      if (scope.held(to) || (scope.held(from) && from != to)) {
        involved.push_back(static_cast<std::int32_t>(p));
      }
    }
  }

  // A pack on rank `to` from `from` that the plan sends, counted in the send offsets of its cell on
  // `from` and in the receiver's count (out.send_off_ and ws.to_end zeroed first). O(1).
  static void count_send(const plan_scope& scope, std::int32_t from, std::int32_t to,
                         std::int32_t step, plan_scratch& ws, plan& out) {
    if (scope.held(from) && from != to) {
      ++out.send_off_[scope.local(from, step)];
      ++ws.to_end[static_cast<std::size_t>(to)];
    }
  }

  // After the counts: the send list's size, and the counts turned into ends. O(cells + dp).
  static void start_sends(const plan_scope& scope, plan_scratch& ws, plan& out) {
    counts_to_ends(out.send_off_);
    counts_to_ends(ws.to_end);
    out.send_.resize(static_cast<std::size_t>(out.send_off_[scope.cells()]));
    ws.by_to.resize(out.send_.size());
  }

  // Pack m, where the plan sends it, into the list by receiver; called backwards in pack order,
  // so that each receiver's part runs by id. O(1).
  static void list_send(const plan_scope& scope, const plan_move& m, plan_scratch& ws) {
    if (scope.held(m.from) && m.from != m.to) {
      ws.by_to[static_cast<std::size_t>(--ws.to_end[static_cast<std::size_t>(m.to)])] = m;
    }
  }

  // The list by receiver dealt into the send lists, by cell, which sorts each by (peer, pack).
  // O(moved).
  static void deal_sends(plan_scope scope, plan_scratch& ws, plan& out) {
    for (std::size_t i = ws.by_to.size(); i-- > 0;) {
      const plan_move& m = ws.by_to[i];
      out.send_[static_cast<std::size_t>(--out.send_off_[scope.local(m.from, m.step)])] =
          transfer{m.pack, m.to, m.bytes};
    }
  }
};

} // namespace detail

// The plan of a valid assignment for ranks [first_rank, last_rank); no validation (make_plan
// validates, solve validated already). Linear (see plan_builder): the compute, keep and receive
// lists by plan_builder::fill_cells (or, with one pack to a cell, fill_one_pack_cells), which also
// list the sends by receiver, then the send lists. Written into `out`, whose storage is reused
// (every list is overwritten whole), with working memory from `ws`: a kept `solver` touches no new
// memory here once its batches stop growing.
inline void detail::build_plan_into(span<const pack_meta> packs, const shape& s,
                                    const assignment& a, std::int32_t first_rank,
                                    std::int32_t last_rank, plan_scratch& ws, plan& out) {
  out.shape_ = s;
  out.first_ = first_rank;
  out.last_ = last_rank;
  plan_scope scope{first_rank, last_rank, static_cast<std::size_t>(s.ga), packs.size()};
  // A plan for some ranks only (a rank's own, typically) first lists the few packs it involves,
  // and the passes visit those instead of the whole batch.
  if (first_rank != 0 || last_rank != s.dp) {
    plan_builder::list_involved(packs, a, scope, ws.involved);
    scope.involved = &ws.involved;
  }
  out.send_off_.assign(scope.cells() + 1, 0);
  ws.to_end.assign(static_cast<std::size_t>(s.dp) + 1, 0);
  if (s.mbs == 1) {
    plan_builder::fill_one_pack_cells(packs, a, scope, ws, out);
  } else {
    plan_builder::fill_cells(packs, s, a, scope, ws, out);
  }
  plan_builder::deal_sends(scope, ws, out);
}

// The plan of assignment `a` for ranks [first_rank, last_rank), in new storage.
inline plan detail::build_plan(span<const pack_meta> packs, const shape& s, const assignment& a,
                               std::int32_t first_rank, std::int32_t last_rank) {
  plan out;
  plan_scratch ws;
  build_plan_into(packs, s, a, first_rank, last_rank, ws, out);
  return out;
}

/// Derives the plan of assignment `a` for the batch `packs` of shape `s`, for every rank.
/// O(packs) plus O(dp); nothing is comparison-sorted. Validates its inputs.
[[nodiscard]] inline plan make_plan(span<const pack_meta> packs, const shape& s,
                                    const assignment& a) {
  validate_batch(packs, s);
  validate_assignment(a, s);
  return detail::build_plan(packs, s, a, 0, s.dp);
}

/// The plan of rank `rank` alone: its compute, keep, send and receive lists. One linear scan of
/// the batch; this is all a rank needs at run time. Validates its inputs.
[[nodiscard]] inline plan make_plan(span<const pack_meta> packs, const shape& s,
                                    const assignment& a, std::int32_t rank) {
  validate_batch(packs, s);
  validate_assignment(a, s);
  PACKSWAP_EXPECTS(rank >= 0 && rank < s.dp, errc::invalid_argument,
                   "rank " << rank << " is outside dp=" << s.dp);
  return detail::build_plan(packs, s, a, rank, rank + 1);
}

/// A digest of an assignment (and its length): equal on every rank that solved the same batch
/// identically; ranks compare it to detect diverging plans.
[[nodiscard]] inline std::uint64_t digest(const assignment& a) noexcept {
  detail::digest d;
  d.u64(a.size());
  for (const auto& c : a) {
    d.i64(c.rank);
    d.i64(c.micro_step);
  }
  return d.value();
}

namespace detail {

// order_micro_steps without validation, in place; `recv` is working memory.
inline void order_steps(span<const pack_meta> packs, const shape& s, assignment& a,
                        std::vector<std::int64_t>& recv, std::vector<std::int64_t>& table) {
  const auto ga = static_cast<std::size_t>(s.ga);
  // Per micro-step: the most bytes one rank receives, and all ranks together.
  recv.assign(2 * ga, 0);
  std::int64_t* step_max = recv.data();
  std::int64_t* step_sum = step_max + ga;
  step_maxima(
      a, s,
      [&](std::size_t p) { return keep_if(packs[p].source_rank != a[p].rank, packs[p].bytes); },
      [&](std::size_t p, std::int64_t v) {
        step_sum[static_cast<std::size_t>(a[p].micro_step)] += v;
      },
      step_max, table);
  std::int32_t best = 0;
  std::int64_t best_max = 0;
  std::int64_t best_sum = 0;
  for (std::int32_t m = 0; m < s.ga; ++m) {
    const std::int64_t mx = step_max[m];
    const std::int64_t sum = step_sum[m];
    if (m == 0 || mx < best_max || (mx == best_max && sum < best_sum)) {
      best = m;
      best_max = mx;
      best_sum = sum;
    }
  }
  for (auto& c : a) {
    if (c.micro_step == best) {
      c.micro_step = 0;
    } else if (c.micro_step < best) {
      ++c.micro_step;
    }
  }
}

// order_micro_steps without validation.
inline assignment order_steps(span<const pack_meta> packs, const shape& s, assignment a) {
  std::vector<std::int64_t> recv;
  std::vector<std::int64_t> table;
  order_steps(packs, s, a, recv, table);
  return a;
}

} // namespace detail

/// Relabels the micro-steps of `a` so that micro-step 0 is the one whose exchange is cheapest:
/// the smallest largest-per-rank receive (the exchange of the first micro-step cannot hide behind
/// compute), then the smallest total receive, then the lowest original index. The other
/// micro-steps keep their relative order. A and B do not change. Validates its inputs.
[[nodiscard]] inline assignment order_micro_steps(span<const pack_meta> packs, const shape& s,
                                                  assignment a) {
  validate_batch(packs, s);
  validate_assignment(a, s);
  return detail::order_steps(packs, s, std::move(a));
}

} // namespace packswap
