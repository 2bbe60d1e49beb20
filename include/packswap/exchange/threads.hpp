#pragma once

#include "packswap/detail/prng.hpp"
#include "packswap/error.hpp"
#include "packswap/exchange/detail/gather.hpp"
#include "packswap/exchange/transport.hpp"
#include "packswap/span.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace packswap::threads {

class transport;

/// The shared state of `size` ranks that are threads of one process: the mailboxes through which
/// their `threads::transport`s exchange host buffers. For tests, examples and single-node runs.
///
/// ```
/// packswap::threads::world world(4);
/// // in thread r:
/// packswap::threads::transport t(world, r);
/// packswap::engine<packswap::threads::transport> e(t, {4, 8});
/// ```
///
/// The world must outlive every transport made from it. An `abort` from any rank is permanent:
/// every later operation of every rank fails with the aborting rank's code and message, so make a
/// new world after a failure.
class world {
 public:
  /// A group of `size` ranks (>= 1).
  explicit world(std::int32_t size)
      : size_(size), links_(checked_size(size) * checked_size(size) * channels),
        wakeups_(checked_size(size)) {}
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  /// The number of ranks.
  [[nodiscard]] std::int32_t size() const noexcept { return size_; }

  /// For tests: from now on every copy of a pack pauses for a random time in [0, `max`] after
  /// its receiver claimed it and before the bytes move, as a copy of a large pack on a busy
  /// machine would; this widens the window in which a sender's buffer is being read.
  void slow_copies(std::chrono::microseconds max) noexcept { copy_pause_us_ = max.count(); }

 private:
  friend class transport;
  // Data and all-gather traffic use separate channels so that a gather can never match a pack.
  static constexpr std::size_t channels = 2;

  struct pending_send;
  struct link {
    std::vector<pending_send*> fifo; // posted, not yet claimed by the receiver
    std::size_t head = 0;
  };

  static std::size_t checked_size(std::int32_t size) {
    PACKSWAP_EXPECTS(size >= 1, errc::invalid_argument,
                     "a threads::world needs at least 1 rank, got " << size);
    return static_cast<std::size_t>(size);
  }

  link& at(std::int32_t src, std::int32_t dst, std::size_t channel) {
    return links_[(static_cast<std::size_t>(src) * static_cast<std::size_t>(size_) +
                   static_cast<std::size_t>(dst)) *
                      channels +
                  channel];
  }

  std::int32_t size_;
  std::atomic<std::int64_t> copy_pause_us_{0};
  std::mutex mutex_;
  std::vector<link> links_;
  // One condition variable per rank: a rank sleeps on its own and is woken when a send to it is
  // posted, when one of its sends was copied, or on abort.
  std::vector<std::condition_variable> wakeups_;
  bool aborted_ = false;
  std::int32_t abort_rank_ = -1;
  errc abort_code_ = errc::transport;
  std::string abort_message_;
};

/// One send waiting in a link for its receiver.
struct world::pending_send {
  const std::byte* data = nullptr;
  std::int64_t bytes = 0;
  std::int64_t* outstanding = nullptr; // the owning request's count of unfinished sends
  std::int64_t* copying = nullptr;     // ... and of sends a receiver is copying right now
};

/// Rank `rank` of a `threads::world`: the in-process transport (host memory).
///
/// Receives are completed by the receiving rank's `wait` (it copies from the sender's buffer),
/// sends by the receiver having copied them; so two ranks make progress as long as both wait.
/// `cancel` takes the request's sends that no receiver claimed out of the mailboxes and returns
/// once every copy in progress from its buffers has finished (both under the world's lock): then
/// no rank reads them any more, and the sender may free them. It needs no abort for that.
/// Models `is_transport_v`. Ownership: refers to the world, which must outlive it.
/// Thread-safety: see `packswap/exchange/transport.hpp`; any number of ranks may run at once.
class transport : public detail::host_transport_base {
 public:
  /// A completion handle; reused by later operations once complete or cancelled.
  class request {
   public:
    request() = default;
    request(const request&) = delete;
    request& operator=(const request&) = delete;

   private:
    friend class transport;
    struct recv_slot {
      recv_op* op = nullptr;
      std::size_t channel = 0;
      bool done = false;
    };
    std::vector<world::pending_send> sends_;
    std::vector<recv_slot> recvs_;
    std::size_t recvs_done_ = 0;
    std::int64_t outstanding_ = 0; // guarded by the world's mutex
    std::int64_t copying_ = 0;     // guarded by the world's mutex
    bool active_ = false;
    // Storage of an all-gather's point-to-point operations.
    std::vector<send_op> gather_sends_;
    std::vector<recv_op> gather_recvs_;
  };

  /// Rank `rank` of `world`, which must outlive the transport.
  transport(world& world, std::int32_t rank)
      : world_(&world), rank_(rank), copy_rng_(static_cast<std::uint64_t>(rank) + 1) {
    PACKSWAP_EXPECTS(rank >= 0 && rank < world.size(), errc::invalid_argument,
                     "rank " << rank << " is outside a threads::world of " << world.size()
                             << " ranks");
  }

  /// This rank.
  [[nodiscard]] std::int32_t rank() const noexcept { return rank_; }
  /// The number of ranks.
  [[nodiscard]] std::int32_t size() const noexcept { return world_->size(); }

  /// Starts gathering `mine` from every rank into `all` (rank r's block at `r * mine.size()`).
  void start_all_gather(request& req, span<const std::byte> mine, span<std::byte> all) {
    detail::gather_as_p2p(rank_, size(), mine, all, req.gather_sends_, req.gather_recvs_);
    start(req, req.gather_sends_, req.gather_recvs_, 1);
  }

  /// Starts a group of sends and receives; see the matching rule in `transport.hpp`.
  void start_exchange(request& req, span<const send_op> sends, span<recv_op> recvs) {
    start(req, sends, recvs, 0);
  }

  /// Copies whatever has arrived for `req` and returns true once all of it is done; false at the
  /// deadline. Throws the aborting rank's error after an abort.
  [[nodiscard]] bool wait(request& req, deadline until) {
    std::unique_lock<std::mutex> lock(world_->mutex_);
    for (;;) {
      throw_if_aborted();
      if (claim_and_copy(req, lock)) {
        continue; // the lock was released for the copy: look again
      }
      if (req.recvs_done_ == req.recvs_.size() && req.outstanding_ == 0) {
        req.active_ = false;
        return true;
      }
      if (world_->wakeups_[static_cast<std::size_t>(rank_)].wait_until(lock, until) ==
              std::cv_status::timeout &&
          exchange_clock::now() >= until) {
        // One last look, so that a completion racing with the deadline is not lost.
        throw_if_aborted();
        while (claim_and_copy(req, lock)) {
        }
        if (req.recvs_done_ == req.recvs_.size() && req.outstanding_ == 0) {
          req.active_ = false;
          return true;
        }
        return false;
      }
    }
  }

  /// Withdraws `req`: its unclaimed sends leave the mailboxes, and this returns only after every
  /// receiver that is copying from its buffers has finished.
  void cancel(request& req) noexcept {
    std::unique_lock<std::mutex> lock(world_->mutex_);
    if (!req.active_) {
      return;
    }
    for (std::int32_t dst = 0; dst < size(); ++dst) {
      for (std::size_t ch = 0; ch < world::channels; ++ch) {
        auto& l = world_->at(rank_, dst, ch);
        const auto mine = [&req](const world::pending_send* p) {
          return p->outstanding == &req.outstanding_;
        };
        l.fifo.erase(std::remove_if(l.fifo.begin() + static_cast<std::ptrdiff_t>(l.head),
                                    l.fifo.end(), mine),
                     l.fifo.end());
      }
    }
    world_->wakeups_[static_cast<std::size_t>(rank_)].wait(lock,
                                                           [&req] { return req.copying_ == 0; });
    req.active_ = false;
  }

  /// Fails every pending and later operation of every rank of the world with `code` and a message
  /// naming this rank.
  void abort(errc code, const std::string& message) noexcept {
    std::lock_guard<std::mutex> lock(world_->mutex_);
    if (world_->aborted_) {
      return;
    }
    world_->aborted_ = true;
    world_->abort_rank_ = rank_;
    world_->abort_code_ = code;
    try {
      world_->abort_message_ = message;
    } catch (...) {
      // Out of memory while failing: the code and rank still go out.
    }
    for (auto& cv : world_->wakeups_) {
      cv.notify_all();
    }
  }

 private:
  void throw_if_aborted() const {
    if (world_->aborted_) {
      PACKSWAP_FAIL(world_->abort_code_, "rank " << world_->abort_rank_ << " aborted the exchange: "
                                                 << world_->abort_message_);
    }
  }

  void start(request& req, span<const send_op> sends, span<recv_op> recvs, std::size_t channel) {
    PACKSWAP_EXPECTS(!req.active_, errc::internal,
                     "rank " << rank_ << ": a threads::transport request was started twice");
    for (const auto& s : sends) {
      check_peer(s.peer);
    }
    for (const auto& r : recvs) {
      check_peer(r.peer);
    }
    std::lock_guard<std::mutex> lock(world_->mutex_);
    throw_if_aborted();
    req.sends_.clear();
    req.recvs_.clear();
    req.recvs_done_ = 0;
    req.copying_ = 0;
    req.outstanding_ = static_cast<std::int64_t>(sends.size());
    // Reserved up front: the mailboxes keep pointers into sends_.
    req.sends_.reserve(sends.size());
    for (const auto& s : sends) {
      req.sends_.push_back(world::pending_send{static_cast<const std::byte*>(s.data), s.bytes,
                                               &req.outstanding_, &req.copying_});
    }
    for (std::size_t i = 0; i < sends.size(); ++i) {
      auto& l = world_->at(rank_, sends[i].peer, channel);
      l.fifo.push_back(&req.sends_[i]);
      world_->wakeups_[static_cast<std::size_t>(sends[i].peer)].notify_all();
    }
    for (auto& r : recvs) {
      r.received = -1;
      req.recvs_.push_back(request::recv_slot{&r, channel, false});
    }
    req.active_ = true;
  }

  void check_peer(std::int32_t peer) const {
    PACKSWAP_EXPECTS(peer >= 0 && peer < size(), errc::invalid_argument,
                     "rank " << rank_ << ": peer " << peer << " is outside a world of " << size()
                             << " ranks");
  }

  // Claims the first receive of `req` whose sender has posted, copies it with the lock released,
  // and completes it. False when nothing could be claimed. Receives from one peer are claimed in
  // the order they were started, which is the matching rule.
  bool claim_and_copy(request& req, std::unique_lock<std::mutex>& lock) {
    std::int32_t blocked_peer = -1;
    std::size_t blocked_channel = 0;
    for (auto& slot : req.recvs_) {
      if (slot.done) {
        continue;
      }
      const auto peer = slot.op->peer;
      if (peer == blocked_peer && slot.channel == blocked_channel) {
        continue; // an earlier receive from this peer is still waiting: keep the order
      }
      auto& l = world_->at(peer, rank_, slot.channel);
      if (l.head == l.fifo.size()) {
        blocked_peer = peer;
        blocked_channel = slot.channel;
        continue;
      }
      world::pending_send* s = l.fifo[l.head++];
      if (l.head == l.fifo.size()) {
        l.fifo.clear(); // keeps its capacity: no allocation once warm
        l.head = 0;
      }
      ++*s->copying;
      lock.unlock();
      if (const auto most = world_->copy_pause_us_.load(std::memory_order_relaxed); most > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(copy_rng_.uniform(0, most)));
      }
      const auto n = std::min(s->bytes, slot.op->bytes);
      if (n > 0) {
        std::memcpy(slot.op->data, s->data, static_cast<std::size_t>(n));
      }
      lock.lock();
      slot.op->received = s->bytes;
      slot.done = true;
      ++req.recvs_done_;
      --*s->copying;
      --*s->outstanding;
      world_->wakeups_[static_cast<std::size_t>(peer)].notify_all();
      return true;
    }
    return false;
  }

  world* world_;
  std::int32_t rank_;
  prng copy_rng_; // the waiting thread's (`slow_copies`)
};

} // namespace packswap::threads
