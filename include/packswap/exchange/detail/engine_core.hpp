#pragma once

#include "packswap/batch.hpp"
#include "packswap/error.hpp"
#include "packswap/exchange/detail/batch.hpp"
#include "packswap/exchange/detail/operations.hpp"
#include "packswap/exchange/detail/receive_slot.hpp"
#include "packswap/exchange/engine_options.hpp"
#include "packswap/exchange/transport.hpp"
#include "packswap/solve.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace packswap::detail {

/// What an `engine`'s worker thread runs and shares with the caller's thread: the state both
/// see, the rule that the first failure wins, and the worker loop (wait for the oldest started
/// operation, check it, solve; cancel everything on the way out). `engine` adds the caller's
/// side. The contract is engine's (packswap/exchange/engine.hpp).
template <class Transport>
class engine_core {
  static_assert(
      is_transport_v<Transport>,
      "engine<T>: T does not model the transport concept (packswap/exchange/transport.hpp)");

 protected:
  using op = operation<Transport>;
  using slot = receive_slot<Transport>;

  static constexpr std::size_t batch_ring = 3; // current, next, and one being recycled
  static constexpr auto slice = std::chrono::milliseconds(10);

  // Starts the worker; see engine's constructor.
  engine_core(Transport& transport, const shape& s, const engine_options& opt)
      : t_(transport), shape_(s), opt_(opt), rank_(transport.rank()),
        ppr_(checked(transport, s, opt).packs_per_rank()),
        nslots_(static_cast<std::size_t>(opt.prefetch_depth) + 1),
        checksums_(opt.verify_checksums && Transport::memory == memory_space::host),
        batches_(std::make_unique<batch_state[]>(batch_ring)),
        slots_(std::make_unique<slot[]>(nslots_)),
        // Enough for the usual steady state: a window of exchanges plus the gathers and digest
        // checks of the batches in flight.
        ops_(nslots_ + 2 * batch_ring) {
    for (std::size_t i = 0; i < batch_ring; ++i) {
      batches_[i].size_for(s);
    }
    for (std::size_t i = 0; i < nslots_; ++i) {
      slots_[i].views.reserve(static_cast<std::size_t>(s.mbs));
    }
    worker_ = std::thread([this] { run(); });
  }

  engine_core(const engine_core&) = delete;
  engine_core& operator=(const engine_core&) = delete;

  // Stops and joins the worker, which cancels whatever is in flight, and frees the buffers.
  ~engine_core() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    join_worker();
    free_buffers();
    if (strays()) {
      // Operations the transport could not stop may still write into the batches' gather
      // buffers and the receive buffers: they stay allocated.
      (void)batches_.release();
      (void)slots_.release();
    }
  }

  static const shape& checked(const Transport& t, const shape& s, const engine_options& opt) {
    validate(s);
    PACKSWAP_EXPECTS(t.size() == s.dp, errc::invalid_argument,
                     "the transport has " << t.size() << " ranks, the shape has dp = " << s.dp);
    PACKSWAP_EXPECTS(opt.prefetch_depth >= 1 && opt.prefetch_depth <= 64, errc::invalid_argument,
                     "prefetch_depth is " << opt.prefetch_depth << ", must be in [1, 64]");
    PACKSWAP_EXPECTS(opt.timeout.count() > 0, errc::invalid_argument,
                     "timeout is " << opt.timeout.count() << " ms, must be positive");
    // The solver's options, here rather than at the first batch's solve on the worker.
    validate_stage2_options(opt.solver, s.dp);
    return s;
  }

  batch_state& batch(std::int64_t k) { return batches_[static_cast<std::size_t>(k) % batch_ring]; }

  // Caller's thread, once the worker is gone: nothing writes into the receive buffers any more,
  // unless the transport reports operations it could not stop; then they stay allocated.
  void free_buffers() noexcept {
    if (!slots_ || strays()) {
      return;
    }
    for (std::size_t i = 0; i < nslots_; ++i) {
      stats_.buffer_bytes -= static_cast<std::int64_t>(slots_[i].capacity);
      slots_[i].release(t_);
    }
  }

  bool strays() const noexcept {
    if constexpr (detail::has_strays<Transport>::value) {
      return t_.stray_operations() > 0;
    } else {
      return false;
    }
  }

  // ---- failure: the first error wins ----

  // Any thread. Keeps `e` when it is the first error and aborts the transport with it, so that
  // the other ranks fail too; then wakes both threads.
  void fail(std::exception_ptr e) noexcept {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) {
        error_ = e;
        first = true;
      }
    }
    // The transport is aborted before the worker learns of the failure: the worker's cancels may
    // abort it too (a transport that cannot withdraw an operation does), and the other ranks
    // must hear this error, not that one.
    if (first) {
      abort_transport(e);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      failed_ = true;
    }
    done_cv_.notify_all();
    work_cv_.notify_all();
  }

  void abort_transport(const std::exception_ptr& e) noexcept {
    errc code = errc::internal;
    const char* message = "engine failure";
    try {
      std::rethrow_exception(e);
    } catch (const error& x) {
      code = x.code();
      message = x.message();
    } catch (const std::exception& x) {
      message = x.what();
    } catch (...) {
      // Not a std::exception: the code and the generic message go out.
    }
    try {
      t_.abort(code, message);
    } catch (...) {
      t_.abort(code, std::string()); // out of memory for the message
    }
  }

  // Throws the first error, after joining the worker (which cancelled everything in flight) and
  // freeing the buffers; returns when the engine has not failed.
  void throw_if_failed() {
    if (!failed_.load()) {
      return;
    }
    join_worker();
    free_buffers();
    std::exception_ptr e;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      e = error_;
    }
    std::rethrow_exception(e);
  }

  // Any thread (abort may come from a watchdog while the caller's thread fails too).
  void join_worker() noexcept {
    work_cv_.notify_all();
    std::lock_guard<std::mutex> lock(join_mutex_);
    if (worker_.joinable()) {
      worker_.join();
    }
  }

  // Where an operation belongs, for error messages.
  std::string context(const op& o) const {
    std::ostringstream os;
    os << "rank " << rank_ << ", batch " << o.batch;
    if (o.kind == op_kind::gather) {
      os << ", metadata all-gather";
    } else if (o.kind == op_kind::digest) {
      os << ", digest all-gather";
    } else {
      os << ", micro-step " << o.seq % shape_.ga << ", peers ";
      std::vector<std::int32_t> peers;
      for (const auto& x : o.sends) {
        peers.push_back(x.peer);
      }
      for (const auto& x : o.recvs) {
        peers.push_back(x.peer);
      }
      std::sort(peers.begin(), peers.end());
      peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
      if (peers.empty()) {
        os << "(none)";
      }
      for (std::size_t i = 0; i < peers.size(); ++i) {
        os << (i ? ", " : "") << peers[i];
      }
    }
    return os.str();
  }

  // ---- the worker ----

  void run() noexcept {
    try {
      for (;;) {
        op* o = next_job();
        if (o == nullptr) {
          break;
        }
        if (Transport::stream_ordered && o->kind == op_kind::exchange) {
          // Stream-ordered exchanges need nothing from the host: watch them for errors and the
          // deadline while gathers go on.
          o->due = exchange_clock::now() + opt_.timeout;
          {
            std::lock_guard<std::mutex> lock(mutex_);
            ops_.pop_front();
          }
          ops_.watch(*o);
          continue;
        }
        if (!wait_for(*o)) {
          break;
        }
        finish(*o);
      }
    } catch (...) {
      fail(std::current_exception());
    }
    cancel_all();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      worker_exited_ = true;
    }
    done_cv_.notify_all();
  }

  // The oldest queued operation (left in the queue until finished, so that a failure cancels
  // it), or null on stop or failure.
  op* next_job() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (stop_ || failed_) {
        return nullptr;
      }
      if (op* o = ops_.front()) {
        return o;
      }
      if (ops_.watched().empty()) {
        work_cv_.wait(lock);
      } else {
        lock.unlock();
        poll_watch();
        lock.lock();
        if (ops_.front() == nullptr && !stop_ && !failed_ && !ops_.watched().empty()) {
          work_cv_.wait_for(lock, std::chrono::microseconds(200));
        }
      }
    }
  }

  // Waits for `o` in slices, so that destruction never waits for a deadline. False on stop.
  bool wait_for(op& o) {
    const deadline due = exchange_clock::now() + opt_.timeout;
    for (;;) {
      if (stop_ || failed_) {
        return false;
      }
      const deadline until = std::min(due, exchange_clock::now() + slice);
      bool done = false;
      try {
        done = t_.wait(o.req, until);
      } catch (error& e) {
        e.add_context(context(o));
        throw;
      }
      if (done) {
        return true;
      }
      if (Transport::stream_ordered) {
        poll_watch();
      }
      if (exchange_clock::now() >= due) {
        PACKSWAP_FAIL(errc::timeout,
                      context(o) << ": did not complete within " << opt_.timeout.count() << " ms");
      }
    }
  }

  // Stream-ordered exchanges: retire the completed ones, fail on error or past their deadline.
  void poll_watch() {
    auto& watched = ops_.watched();
    std::size_t kept = 0;
    for (std::size_t i = 0; i < watched.size(); ++i) {
      op& o = *watched[i];
      bool done = false;
      try {
        done = t_.wait(o.req, exchange_clock::now());
      } catch (error& e) {
        e.add_context(context(o));
        throw;
      }
      if (done) {
        std::lock_guard<std::mutex> lock(mutex_);
        --batch(o.batch).jobs;
        mark_done(o);
        ops_.give_back(o);
        done_cv_.notify_all();
        continue;
      }
      if (exchange_clock::now() >= o.due) {
        PACKSWAP_FAIL(errc::timeout,
                      context(o) << ": did not complete within " << opt_.timeout.count() << " ms");
      }
      watched[kept++] = &o;
    }
    watched.resize(kept);
  }

  // Under mutex_. A stream-ordered slot may already hold a later micro-step (the caller reuses it
  // once the stream passed its release, without waiting for the worker to notice).
  void mark_done(const op& o) {
    auto& sl = slots_[static_cast<std::size_t>(o.seq) % nslots_];
    if (sl.seq == o.seq) {
      sl.done = true;
    }
  }

  void finish(op& o) {
    batch_state& b = batch(o.batch);
    try {
      if (o.kind == op_kind::gather) {
        b.read_metadata(shape_, rank_);
        try {
          solver_.solve(span<const pack_meta>(b.packs), shape_, opt_.solver, b.sol);
        } catch (error& e) {
          e.add_context("the gathered metadata is not a valid batch");
          throw;
        }
        b.after_solve(shape_);
      } else if (o.kind == op_kind::digest) {
        b.check_digests(shape_.dp);
      } else {
        // Host memory: nothing that arrived short, long or altered is handed out.
        b.check_received(span<const recv_op>(o.recvs), span<const std::int32_t>(o.recv_packs),
                         checksums_);
      }
    } catch (error& e) {
      e.add_context(context(o));
      throw;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (o.kind == op_kind::gather) {
      b.planned = true;
    } else if (o.kind == op_kind::digest) {
      b.verified = true;
    } else {
      mark_done(o);
    }
    --b.jobs;
    ops_.pop_front();
    ops_.give_back(o);
    done_cv_.notify_all();
  }

  // Worker, on its way out: nothing it was given may still touch a buffer. Cancels outside the
  // lock (a cancel may wait for copies in progress, or for other ranks to drain), newest first:
  // a transport that matches each link's messages in the order they were posted (threads) hands
  // a peer still waiting on an older receive whatever send comes next on that link, so were the
  // older operation's sends withdrawn first, the peer could take the next operation's send, a
  // pack of another size (errc::mismatch) or its bytes in place of the one it waits for. Newest
  // first, what stays in every link is a prefix of what this rank posted there.
  void cancel_all() noexcept {
    std::vector<op*> pending;
    bool listed = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      try {
        ops_.unfinished(pending);
      } catch (...) {
        listed = false; // out of memory: cancel them one by one below, under the lock
      }
    }
    for (op* o : pending) {
      t_.cancel(o->req);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ops_.retire_unfinished([&](op& o) {
      if (!listed) {
        t_.cancel(o.req);
      }
      --batch(o.batch).jobs;
    });
  }

  Transport& t_;
  const shape shape_;
  const engine_options opt_;
  const std::int32_t rank_;
  const std::int64_t ppr_;
  const std::size_t nslots_;
  const bool checksums_;
  std::unique_ptr<batch_state[]> batches_;
  std::unique_ptr<slot[]> slots_;

  // Caller's thread only.
  std::int64_t submitted_ = 0; // batches submitted
  std::int64_t issued_ = 0;    // micro-steps whose exchange was started
  std::int64_t released_ = 0;  // micro-steps released
  bool held_ = false;          // a micro-step is acquired and not released
  engine_stats stats_{};

  // Shared with the worker, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable work_cv_; // the worker waits for work or stop
  std::condition_variable done_cv_; // the caller waits for progress or failure
  operation_pool<Transport> ops_;
  std::exception_ptr error_; // the first failure, rethrown by every later call
  bool worker_exited_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::mutex join_mutex_; // serializes joining the worker

  // Worker only.
  packswap::solver solver_; // keeps its working memory from batch to batch

  std::thread worker_; // last: started when everything above exists
};

} // namespace packswap::detail
