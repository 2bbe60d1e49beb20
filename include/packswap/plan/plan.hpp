#pragma once

#include "packswap/balance/batch.hpp"
#include "packswap/detail/digest.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

namespace packswap {

/// One pack crossing between two ranks. In a send list `peer` is the receiver, in a receive list
/// the sender.
struct transfer {
  std::int32_t pack = 0;  ///< pack id (its index in the gathered metadata)
  std::int32_t peer = 0;  ///< the other rank
  std::int64_t bytes = 0; ///< payload size

  friend constexpr bool operator==(const transfer& x, const transfer& y) noexcept {
    return x.pack == y.pack && x.peer == y.peer && x.bytes == y.bytes;
  }
};

/// What every rank does at every micro-step, derived from an assignment.
///
/// For rank r and micro-step m: `compute(r, m)` lists the packs r computes (ascending pack id);
/// `keep(r, m)` those among them that r's own loader produced (used in place, never copied);
/// `receives(r, m)` the others, each with the rank it comes from; `sends(r, m)` the packs of r's
/// loader that another rank computes at micro-step m. Send and receive lists are sorted by
/// (peer, pack id), so both ends of every link list the same packs in the same order.
///
/// A plan is immutable and owns its storage; the spans it returns live as long as the plan.
class plan {
 public:
  plan() = default;

  /// The batch shape this plan is for.
  const packswap::shape& batch_shape() const noexcept { return shape_; }

  span<const std::int32_t> compute(std::int32_t rank, std::int32_t step) const {
    return slice(compute_, compute_off_, rank, step);
  }
  span<const std::int32_t> keep(std::int32_t rank, std::int32_t step) const {
    return slice(keep_, keep_off_, rank, step);
  }
  span<const transfer> sends(std::int32_t rank, std::int32_t step) const {
    return slice(send_, send_off_, rank, step);
  }
  span<const transfer> receives(std::int32_t rank, std::int32_t step) const {
    return slice(recv_, recv_off_, rank, step);
  }

  /// Bytes rank `rank` receives for micro-step `step`.
  std::int64_t receive_bytes(std::int32_t rank, std::int32_t step) const {
    std::int64_t sum = 0;
    for (const auto& t : receives(rank, step)) {
      sum += t.bytes;
    }
    return sum;
  }

  /// Bytes rank `rank` sends for micro-step `step`.
  std::int64_t send_bytes(std::int32_t rank, std::int32_t step) const {
    std::int64_t sum = 0;
    for (const auto& t : sends(rank, step)) {
      sum += t.bytes;
    }
    return sum;
  }

  /// A digest of the whole plan, equal on every rank that computed the same plan.
  std::uint64_t digest() const noexcept {
    detail::digest d;
    d.i64(shape_.dp);
    d.i64(shape_.ga);
    d.i64(shape_.mbs);
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

  friend plan make_plan(span<const pack_meta> packs, const shape& s, const assignment& a);

 private:
  template <class T>
  span<const T> slice(const std::vector<T>& data, const std::vector<std::int64_t>& off,
                      std::int32_t rank, std::int32_t step) const {
    PACKSWAP_EXPECTS(rank >= 0 && rank < shape_.dp && step >= 0 && step < shape_.ga,
                     errc::invalid_argument,
                     "(rank " << rank << ", micro-step " << step << ") is outside dp=" << shape_.dp
                              << " ga=" << shape_.ga);
    const auto c = static_cast<std::size_t>(rank) * static_cast<std::size_t>(shape_.ga) +
                   static_cast<std::size_t>(step);
    return span<const T>(data.data() + off[c], static_cast<std::size_t>(off[c + 1] - off[c]));
  }

  packswap::shape shape_{};
  std::vector<std::int64_t> compute_off_, keep_off_, send_off_, recv_off_;
  std::vector<std::int32_t> compute_, keep_;
  std::vector<transfer> send_, recv_;
};

namespace detail {

// Turns per-cell counts into CSR offsets (exclusive prefix sums, one extra entry at the end).
inline void counts_to_offsets(std::vector<std::int64_t>& off) {
  std::int64_t run = 0;
  for (auto& x : off) {
    const std::int64_t n = x;
    x = run;
    run += n;
  }
}

} // namespace detail

/// Derives the plan of assignment `a` for the batch `packs` of shape `s`. O(packs) plus sorting
/// each cell's short transfer lists. Validates its inputs.
inline plan make_plan(span<const pack_meta> packs, const shape& s, const assignment& a) {
  validate_batch(packs, s);
  validate_assignment(a, s);
  plan out;
  out.shape_ = s;
  const auto cells = static_cast<std::size_t>(s.cells());
  const auto ga = static_cast<std::size_t>(s.ga);
  out.compute_off_.assign(cells + 1, 0);
  out.keep_off_.assign(cells + 1, 0);
  out.send_off_.assign(cells + 1, 0);
  out.recv_off_.assign(cells + 1, 0);
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const auto to =
        static_cast<std::size_t>(a[p].rank) * ga + static_cast<std::size_t>(a[p].micro_step);
    ++out.compute_off_[to];
    if (packs[p].source_rank == a[p].rank) {
      ++out.keep_off_[to];
    } else {
      const auto from = static_cast<std::size_t>(packs[p].source_rank) * ga +
                        static_cast<std::size_t>(a[p].micro_step);
      ++out.send_off_[from];
      ++out.recv_off_[to];
    }
  }
  detail::counts_to_offsets(out.compute_off_);
  detail::counts_to_offsets(out.keep_off_);
  detail::counts_to_offsets(out.send_off_);
  detail::counts_to_offsets(out.recv_off_);
  out.compute_.resize(static_cast<std::size_t>(out.compute_off_[cells]));
  out.keep_.resize(static_cast<std::size_t>(out.keep_off_[cells]));
  out.send_.resize(static_cast<std::size_t>(out.send_off_[cells]));
  out.recv_.resize(static_cast<std::size_t>(out.recv_off_[cells]));
  std::vector<std::int64_t> c_pos(out.compute_off_.begin(), out.compute_off_.end() - 1);
  std::vector<std::int64_t> k_pos(out.keep_off_.begin(), out.keep_off_.end() - 1);
  std::vector<std::int64_t> s_pos(out.send_off_.begin(), out.send_off_.end() - 1);
  std::vector<std::int64_t> r_pos(out.recv_off_.begin(), out.recv_off_.end() - 1);
  // Packs are visited in id order, so every list below is filled in ascending pack id; the
  // transfer lists then only need a stable sort by peer.
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const auto id = static_cast<std::int32_t>(p);
    const auto to =
        static_cast<std::size_t>(a[p].rank) * ga + static_cast<std::size_t>(a[p].micro_step);
    out.compute_[static_cast<std::size_t>(c_pos[to]++)] = id;
    if (packs[p].source_rank == a[p].rank) {
      out.keep_[static_cast<std::size_t>(k_pos[to]++)] = id;
    } else {
      const auto from = static_cast<std::size_t>(packs[p].source_rank) * ga +
                        static_cast<std::size_t>(a[p].micro_step);
      out.send_[static_cast<std::size_t>(s_pos[from]++)] = transfer{id, a[p].rank, packs[p].bytes};
      out.recv_[static_cast<std::size_t>(r_pos[to]++)] =
          transfer{id, packs[p].source_rank, packs[p].bytes};
    }
  }
  const auto by_peer = [](const transfer& x, const transfer& y) {
    return std::tie(x.peer, x.pack) < std::tie(y.peer, y.pack);
  };
  for (std::size_t c = 0; c < cells; ++c) {
    std::sort(out.send_.begin() + out.send_off_[c], out.send_.begin() + out.send_off_[c + 1],
              by_peer);
    std::sort(out.recv_.begin() + out.recv_off_[c], out.recv_.begin() + out.recv_off_[c + 1],
              by_peer);
  }
  return out;
}

/// Relabels the micro-steps of `a` so that micro-step 0 is the one whose exchange is cheapest:
/// the smallest largest-per-rank receive (the exchange of the first micro-step cannot hide behind
/// compute), then the smallest total receive, then the lowest original index. The other
/// micro-steps keep their relative order. A and B do not change. Validates its inputs.
inline assignment order_micro_steps(span<const pack_meta> packs, const shape& s, assignment a) {
  validate_batch(packs, s);
  validate_assignment(a, s);
  const auto ga = static_cast<std::size_t>(s.ga);
  std::vector<std::int64_t> recv(static_cast<std::size_t>(s.cells()), 0);
  for (std::size_t p = 0; p < packs.size(); ++p) {
    if (packs[p].source_rank != a[p].rank) {
      recv[static_cast<std::size_t>(a[p].rank) * ga + static_cast<std::size_t>(a[p].micro_step)] +=
          packs[p].bytes;
    }
  }
  std::int32_t best = 0;
  std::int64_t best_max = 0;
  std::int64_t best_sum = 0;
  for (std::int32_t m = 0; m < s.ga; ++m) {
    std::int64_t mx = 0;
    std::int64_t sum = 0;
    for (std::int32_t r = 0; r < s.dp; ++r) {
      const auto v = recv[static_cast<std::size_t>(r) * ga + static_cast<std::size_t>(m)];
      mx = std::max(mx, v);
      sum += v;
    }
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
  return a;
}

} // namespace packswap
