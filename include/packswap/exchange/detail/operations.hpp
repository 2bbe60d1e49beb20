#pragma once

#include "packswap/exchange/transport.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace packswap::detail {

/// What a transport operation of the engine is for.
enum class op_kind : std::uint8_t {
  gather,   ///< a batch's metadata all-gather
  digest,   ///< the all-gather of every rank's metadata and plan digests
  exchange, ///< one micro-step's sends and receives
};

/// One started transport operation and what the worker needs to finish it.
template <class Transport>
struct operation {
  typename Transport::request req;
  std::vector<send_op> sends;
  std::vector<recv_op> recvs;
  std::vector<std::int32_t> recv_packs; ///< pack id of each receive
  op_kind kind = op_kind::exchange;
  std::int64_t batch = 0;
  std::int64_t seq = -1; ///< micro-step in the engine's sequence (exchanges)
  deadline due{};        ///< stream-ordered exchanges: when the worker gives up on it
};

/// The engine's operations, and where each one is. The pool owns every operation it ever made,
/// for its whole life: a transport keeps pointers to a request (and to its receive list) while
/// the operation runs, so operations never move and are never freed before the engine. Every
/// operation is in exactly one place:
///  - idle: ready to be started again;
///  - out: taken for a start that has not been queued yet (the caller's thread holds it);
///  - queued: started, in start order, for the worker; the front one is what the worker waits
///    for, and it stays queued until finished, so that a failure cancels it;
///  - watched: stream-ordered exchanges the worker polls out of order.
/// Not thread-safe: the engine calls it under its mutex (`watch`, `watched` on the worker only).
template <class Transport>
class operation_pool {
 public:
  using op = operation<Transport>;

  /// Makes `n` operations up front, the usual steady-state need.
  explicit operation_pool(std::size_t n) {
    idle_.reserve(n);
    queue_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      idle_.push_back(&all_.emplace_back());
    }
  }

  operation_pool(const operation_pool&) = delete;
  operation_pool& operator=(const operation_pool&) = delete;

  /// An idle operation (a new one when none is), labelled for a start.
  op& take(op_kind kind, std::int64_t batch, std::int64_t seq) {
    op* o = nullptr;
    if (idle_.empty()) {
      o = &all_.emplace_back();
    } else {
      o = idle_.back();
      idle_.pop_back();
    }
    o->kind = kind;
    o->batch = batch;
    o->seq = seq;
    return *o;
  }

  /// Back to idle: finished, cancelled, or never started.
  void give_back(op& o) { idle_.push_back(&o); }

  /// Queues a started operation for the worker.
  void enqueue(op& o) { queue_.push_back(&o); }

  /// The oldest queued operation, or null.
  op* front() const noexcept { return head_ < queue_.size() ? queue_[head_] : nullptr; }

  /// Removes the front operation from the queue (it is then the caller's to give back or
  /// watch). Compacts in place: the queue stops allocating once it reached its usual length.
  void pop_front() {
    ++head_;
    if (head_ * 2 >= queue_.size()) {
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

  /// Worker only: a stream-ordered exchange popped from the queue, to poll.
  void watch(op& o) { watch_.push_back(&o); }
  std::vector<op*>& watched() noexcept { return watch_; }

  /// Every queued and watched operation, newest first, appended to `out` (all of them, or none
  /// when out of memory): what a shutdown must cancel, in the order it must (see
  /// engine_core::cancel_all).
  void unfinished(std::vector<op*>& out) const {
    out.reserve(out.size() + (queue_.size() - head_) + watch_.size());
    newest_first([&](op* o) { out.push_back(o); });
  }

  /// Calls `f(op&)` on every queued and watched operation, newest first (as `unfinished` lists
  /// them), then makes them all idle.
  template <class F>
  void retire_unfinished(F&& f) {
    newest_first([&](op* o) {
      f(*o);
      give_back(*o);
    });
    queue_.clear();
    head_ = 0;
    watch_.clear();
  }

  /// Operations made since construction (each holds one transport request).
  std::int64_t created() const noexcept { return static_cast<std::int64_t>(all_.size()); }

 private:
  // Calls `g(op*)` on every queued and watched operation, newest first: the queue from its back,
  // then the watched ones from the last watched (each left the queue at its front, so it is
  // older than every queued one).
  template <class G>
  void newest_first(G&& g) const {
    for (std::size_t i = queue_.size(); i-- > head_;) {
      g(queue_[i]);
    }
    for (std::size_t i = watch_.size(); i-- > 0;) {
      g(watch_[i]);
    }
  }

  std::deque<op> all_; // the owner; a deque never moves its elements when it grows
  std::vector<op*> idle_;
  std::vector<op*> queue_;
  std::size_t head_ = 0;
  std::vector<op*> watch_;
};

} // namespace packswap::detail
