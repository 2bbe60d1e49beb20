#pragma once

#include "packswap/batch.hpp"
#include "packswap/error.hpp"
#include "packswap/exchange/detail/batch.hpp"
#include "packswap/exchange/detail/engine_core.hpp"
#include "packswap/exchange/detail/operations.hpp"
#include "packswap/exchange/detail/receive_slot.hpp"
#include "packswap/exchange/detail/wire.hpp"
#include "packswap/exchange/engine_options.hpp"
#include "packswap/exchange/micro_batch.hpp"
#include "packswap/exchange/transport.hpp"
#include "packswap/solve.hpp"
#include "packswap/span.hpp"

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

namespace packswap {

/// The asynchronous exchange engine of one rank: per global batch it gathers every rank's pack
/// metadata, solves and plans on its worker thread, and exchanges micro-step m+1 (up to
/// `prefetch_depth` ahead) while the caller computes micro-step m.
///
/// ```
/// packswap::threads::transport t(world, rank);  // or mpi::transport, nccl::transport
/// packswap::engine<packswap::threads::transport> e(t, {dp, ga});
/// e.submit(my_packs(0));                       // this rank's ga * mbs local_packs
/// for (std::int64_t step = 0; step < steps; ++step) {
///   if (step + 1 < steps) {
///     e.submit(my_packs(step + 1));            // early: its gather and solve overlap
///   }
///   for (std::int32_t m = 0; m < ga; ++m) {
///     packswap::micro_batch cell = e.acquire(m); // verified; kept packs in place
///     for (const auto& p : cell.packs) {
///       forward_backward(p.data, p.bytes);
///     }
///     e.release(m);                            // the buffers go back to the pool
///   }
///   optimizer_step();
/// }
/// ```
///
/// Ordering: the caller's thread starts every transport operation, at points fixed by the
/// sequence of `submit`/`acquire`/`release` calls (never by timing), so every rank issues the
/// same operations in the same order relative to its own other work; the worker only waits for
/// completions, verifies and solves. That is what keeps NCCL safe under
/// `CUDA_DEVICE_MAX_CONNECTIONS=1`. A consequence: when an exchange of a batch must start and
/// that batch's plan is not ready, the call blocks until the worker has solved it; submit each
/// batch at least `prefetch_depth` micro-steps before it is needed to keep that off the critical
/// path.
///
/// Ownership: the transport must outlive the engine. The engine owns its receive buffers, the
/// `micro_batch`es it hands out (valid until that micro-step's `release`) and every transport
/// request; the caller owns the payloads it submits. Steady state allocates no payload memory:
/// `prefetch_depth + 1` receive buffers are reused.
///
/// When the caller may free (or reuse) a submitted payload, on every path:
///  - normal: once `release` of its batch's last micro-step returned. Host transports: every
///    exchange of the batch completed before its last `acquire` returned. Stream-ordered
///    transports: once the stream passed to that `release` has passed it (synchronize it, or
///    free with a stream-ordered free on it).
///  - error: once any call has thrown the engine's error. The engine aborted the transport
///    (the other ranks fail with this error), the worker cancelled everything in flight and was
///    joined before the exception left the engine.
///  - abort: once `abort()` returned (the same steps as an error; the next call throws
///    `errc::cancelled`).
///  - destruction, also mid-flight: once the destructor returned (it cancels everything in
///    flight and joins the worker). A transport that cannot withdraw an operation in flight (MPI,
///    NCCL) aborts when it is cancelled, so the other ranks then fail with `errc::cancelled`;
///    the threads transport withdraws it, and a peer still waiting sees its deadline pass (call
///    `abort` first to fail it now).
/// "Cancelled" is each transport's promise, kept before its `cancel` returns: the threads
/// transport takes this rank's sends out of the other ranks' mailboxes and waits for copies in
/// progress; MPI gets every send taken (by a receive or by the peer's drain) and every receive
/// completed; NCCL waits for its stream (see each transport). Where a transport cannot keep it
/// within its deadline (MPI: a rank that neither exits nor notices the abort; NCCL: a stream
/// that never drains), `stats().stray_operations` is not zero: keep the payloads alive (the
/// engine keeps its own buffers). Stream-ordered transports: your own stream may still run
/// kernels on the micro-batch and on kept packs (your payloads) after an error; synchronize it
/// before freeing. A call refused for its arguments (`errc::invalid_argument`: out of order,
/// wrong count) changes nothing: the engine runs on and the normal rule applies.
///
/// Errors: a failure on the worker (transport error, timeout, mismatch, corrupted pack) or in a
/// call (a transport start, an allocation) fails the engine as above and is thrown by that call
/// or the caller's next one, and again by every later call, as the same exception with its type
/// kept: a backend's `nccl::nccl_error` stays one. `packswap::error`s carry the rank, batch,
/// micro-step and peers in front of their message (`error::add_context`). Every rank compares
/// digests of the gathered metadata and of its plan (an all-gather of two words per batch), so
/// ranks that disagree all fail with `errc::mismatch`. Host transports hand out nothing before
/// that check, the length check and the payload checksum passed. Stream-ordered transports
/// (NCCL) do not block `acquire` on them: the checks run on the worker as the events complete,
/// and a failure aborts the exchange communicator and is thrown by the next call.
///
/// Thread-safety: one caller thread drives an engine (`abort` may also come from another
/// thread, such as a watchdog's); there is exactly one worker thread, joined on destruction and
/// on every error path.
template <class Transport>
class engine : private detail::engine_core<Transport> {
 public:
  using transport_type = Transport;                    ///< the transport it drives
  using stream_type = typename Transport::stream_type; ///< the transport's stream type

  /// Starts the worker. Throws `errc::invalid_argument` when `s` is not a valid shape, when
  /// `s.dp` differs from the transport's size, or when an option is out of range (the solver's
  /// eps, work_scale and topology included).
  engine(Transport& transport, const shape& s, const engine_options& opt = {})
      : detail::engine_core<Transport>(transport, s, opt) {}

  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// Stops and joins the worker, which cancels whatever is in flight, and frees the buffers.
  /// When it returns, no operation of this rank touches the payloads any more (see the class
  /// comment for stream-ordered transports and stray operations). Never throws.
  ~engine() = default;

  /// Hands over this rank's packs of the next global batch (`ga * mbs` of them, in loader order)
  /// and starts the metadata all-gather; solving happens on the worker. At most two batches may
  /// be unfinished (not fully released) at once: the current one and the next.
  void submit(span<const local_pack> packs) {
    throw_if_failed();
    PACKSWAP_EXPECTS(static_cast<std::int64_t>(packs.size()) == ppr_, errc::invalid_argument,
                     "rank " << rank_ << ": submit() got " << packs.size()
                             << " packs, each rank submits ga * mbs = " << ppr_);
    for (std::size_t i = 0; i < packs.size(); ++i) {
      const auto& p = packs[i];
      PACKSWAP_EXPECTS(p.cost >= 0 && p.bytes >= 0, errc::invalid_argument,
                       "rank " << rank_ << ": pack " << i << " has cost " << p.cost << " and "
                               << p.bytes << " bytes, both must be >= 0");
      PACKSWAP_EXPECTS(p.bytes == 0 || p.data != nullptr, errc::invalid_argument,
                       "rank " << rank_ << ": pack " << i << " has " << p.bytes
                               << " bytes and no data");
    }
    const std::int64_t finished = released_ / shape_.ga;
    PACKSWAP_EXPECTS(submitted_ - finished < 2, errc::invalid_argument,
                     "rank " << rank_ << ": submit() of batch " << submitted_ << " while batches "
                             << finished << " and " << finished + 1
                             << " are unfinished; submit at most one batch ahead");
    guarded([&] { start_batch(packs); });
  }

  /// The packs of this rank's cell for micro-step `micro_step` of the current batch, ready to
  /// use. Host transports: blocks until they arrived and were verified. Stream-ordered
  /// transports: returns at once and makes `stream` wait for the exchange (no host blocking).
  /// Micro-steps are acquired in order, each released before the next is acquired.
  micro_batch acquire(std::int32_t micro_step, stream_type stream = stream_type{}) {
    throw_if_failed();
    const std::int64_t s = released_;
    const std::int64_t k = s / shape_.ga;
    PACKSWAP_EXPECTS(!held_, errc::invalid_argument,
                     "rank " << rank_ << ": acquire(" << micro_step << ") while micro-step "
                             << s % shape_.ga << " is not released");
    PACKSWAP_EXPECTS(micro_step == static_cast<std::int32_t>(s % shape_.ga), errc::invalid_argument,
                     "rank " << rank_ << ": acquire(" << micro_step << "), the next micro-step of "
                             << "batch " << k << " is " << s % shape_.ga);
    PACKSWAP_EXPECTS(k < submitted_, errc::invalid_argument,
                     "rank " << rank_ << ": acquire(" << micro_step << ") of batch " << k
                             << ", which was not submitted");
    return guarded([&] { return hand_out(micro_step, stream); });
  }

  /// Hands micro-step `micro_step`'s buffers back; the exchange of a later micro-step may start
  /// into them (stream-ordered transports: once `stream` has passed this point).
  void release(std::int32_t micro_step, stream_type stream = stream_type{}) {
    throw_if_failed();
    const std::int64_t s = released_;
    PACKSWAP_EXPECTS(held_ && micro_step == static_cast<std::int32_t>(s % shape_.ga),
                     errc::invalid_argument,
                     "rank " << rank_ << ": release(" << micro_step << ") but "
                             << (held_ ? "the acquired micro-step is " : "nothing is acquired; ")
                             << (held_ ? std::to_string(s % shape_.ga) : std::string()));
    guarded([&] { take_back(stream); });
  }

  /// Gives up: fails this engine with `errc::cancelled`, aborts the transport so that the other
  /// ranks fail now instead of at their deadline, and returns once the worker has stopped and
  /// cancelled everything in flight: the payloads may be freed at once (see the class comment
  /// for the transports' limits). For catch blocks around a training step. It may also come from
  /// another thread (a watchdog); a call the driving thread is making then throws the error, and
  /// the payloads may be freed once that call has thrown too.
  void abort(const std::string& reason) noexcept {
    try {
      fail(std::make_exception_ptr(
          error(errc::cancelled, "rank " + std::to_string(rank_) + " gave up: " + reason)));
    } catch (...) {
      fail(std::make_exception_ptr(error(errc::cancelled, "gave up")));
    }
    join_worker();
  }

  /// Counters; from the caller's thread.
  [[nodiscard]] engine_stats stats() const {
    engine_stats out = stats_;
    out.batches_submitted = submitted_;
    std::lock_guard<std::mutex> lock(mutex_);
    out.worker_running = !worker_exited_;
    out.request_allocations = ops_.created();
    if constexpr (detail::has_strays<Transport>::value) {
      out.stray_operations = t_.stray_operations();
    }
    if constexpr (detail::has_tuning<Transport>::value) {
      out.ctas = t_.ctas();
    }
    return out;
  }

  /// This rank (the transport's).
  [[nodiscard]] std::int32_t rank() const noexcept { return rank_; }
  /// The shape of every global batch.
  [[nodiscard]] const shape& batch_shape() const noexcept { return shape_; }

 private:
  using core = detail::engine_core<Transport>;
  using typename core::op;
  using typename core::slot;
  using op_kind = detail::op_kind;
  using core::batch;
  using core::checksums_;
  using core::context;
  using core::done_cv_;
  using core::fail;
  using core::failed_;
  using core::held_;
  using core::issued_;
  using core::join_worker;
  using core::mutex_;
  using core::nslots_;
  using core::ops_;
  using core::opt_;
  using core::ppr_;
  using core::rank_;
  using core::released_;
  using core::shape_;
  using core::slots_;
  using core::stats_;
  using core::submitted_;
  using core::t_;
  using core::throw_if_failed;
  using core::work_cv_;
  using core::worker_exited_;

  // ---- the caller's side ----

  // Runs the part of a call that changes the engine's state. Whatever it throws fails the engine
  // first (the transport is aborted, the worker cancels what is in flight and is joined), so that
  // when the exception reaches the caller nothing this rank started touches the caller's memory.
  template <class F>
  decltype(auto) guarded(F&& f) {
    try {
      return f();
    } catch (...) {
      fail(std::current_exception());
    }
    throw_if_failed();
    PACKSWAP_FAIL(errc::internal, "rank " << rank_ << ": a failed call did not fail the engine");
  }

  // submit() once its arguments were checked.
  void start_batch(span<const local_pack> packs) {
    const std::int64_t k = submitted_;
    detail::batch_state& b = batch(k);
    wait_worker_done_with(b);
    b.index = k;
    b.planned = false;
    b.verified = false;
    b.local.assign(packs.begin(), packs.end());
    detail::meta_header h;
    h.batch = static_cast<std::uint64_t>(k);
    h.packs = static_cast<std::uint64_t>(ppr_);
    h.flags = checksums_ ? detail::meta_header::checksummed : 0;
    if constexpr (detail::has_tuning<Transport>::value) {
      h.compute_ns = static_cast<std::uint64_t>(t_.compute_ns());
    }
    detail::put_header(b.gather_mine.data(), h);
    for (std::size_t i = 0; i < packs.size(); ++i) {
      const auto& p = packs[i];
      const std::uint64_t sum =
          checksums_ ? detail::payload_checksum(p.data, static_cast<std::size_t>(p.bytes)) : 0;
      detail::put_record(b.gather_mine.data() + detail::meta_header_bytes +
                             i * detail::meta_record_bytes,
                         p.cost, p.bytes, sum);
    }
    op& o = take(op_kind::gather, k, -1);
    start(o, [&] {
      t_.start_all_gather(o.req, span<const std::byte>(b.gather_mine),
                          span<std::byte>(b.gather_all));
    });
    ++submitted_;
    pump();
  }

  // acquire() once its arguments were checked.
  micro_batch hand_out(std::int32_t micro_step, stream_type stream) {
    const std::int64_t s = released_;
    const std::int64_t k = s / shape_.ga;
    pump();
    slot& sl = slots_[static_cast<std::size_t>(s) % nslots_];
    PACKSWAP_EXPECTS(sl.seq == s, errc::internal,
                     "rank " << rank_ << ": micro-step " << s << " was not started");
    detail::batch_state& b = batch(k);
    if constexpr (Transport::stream_ordered) {
      t_.wait_fence(sl.ready, stream);
    } else {
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait(lock, [&] { return (sl.done && b.verified) || failed_; });
    }
    throw_if_failed();
    if constexpr (detail::has_tuning<Transport>::value) {
      t_.compute_begin(stream);
    }
    held_ = true;
    for (const auto& v : sl.views) {
      (v.kept ? stats_.packs_kept : stats_.packs_received) += 1;
    }
    return micro_batch{k, micro_step, span<const pack_view>(sl.views), &b.sol};
  }

  // release() once its arguments were checked.
  void take_back(stream_type stream) {
    slot& sl = slots_[static_cast<std::size_t>(released_) % nslots_];
    if constexpr (detail::has_tuning<Transport>::value) {
      t_.compute_end(stream);
    }
    t_.record(sl.released, stream);
    sl.used = true;
    held_ = false;
    ++released_;
    ++stats_.micro_steps_released;
    pump();
  }

  op& take(op_kind kind, std::int64_t k, std::int64_t seq) {
    std::lock_guard<std::mutex> lock(mutex_);
    return ops_.take(kind, k, seq);
  }

  // Starts `o` on the caller's thread and queues it for the worker. A start that throws started
  // nothing (the transport contract); the error says which operation, and `guarded` fails the
  // engine with it. An engine that failed meanwhile cancels what was just started.
  template <class Start>
  void start(op& o, Start&& start_op) {
    try {
      start_op();
    } catch (error& e) {
      e.add_context(context(o));
      give_back(o);
      throw;
    } catch (...) {
      give_back(o);
      throw;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (failed_) {
      lock.unlock();
      t_.cancel(o.req);
      give_back(o);
      throw_if_failed();
    }
    ++batch(o.batch).jobs;
    ops_.enqueue(o);
    lock.unlock();
    work_cv_.notify_one();
  }

  void give_back(op& o) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      ops_.give_back(o);
    } catch (...) {
      // Out of memory for the idle list: the operation stays the pool's, unused.
    }
  }

  // Starts every exchange the window allows, in order. Whether one starts depends only on the
  // calls made so far, never on timing: the same on every rank.
  void pump() {
    for (;;) {
      const std::int64_t s = issued_;
      const std::int64_t k = s / shape_.ga;
      if (k >= submitted_ || s - released_ >= static_cast<std::int64_t>(nslots_)) {
        return;
      }
      if (!opt_.prefetch_across_batches && k != released_ / shape_.ga) {
        return;
      }
      issue(s);
      ++issued_;
    }
  }

  void issue(std::int64_t s) {
    const std::int64_t k = s / shape_.ga;
    const auto m = static_cast<std::int32_t>(s % shape_.ga);
    detail::batch_state& b = batch(k);
    if (m == 0) {
      wait_planned(b);
      if constexpr (detail::has_tuning<Transport>::value) {
        t_.tune(b.tune_bytes, b.tune_ns);
      }
      op& d = take(op_kind::digest, k, -1);
      start(d, [&] {
        t_.start_all_gather(d.req, span<const std::byte>(b.digest_mine),
                            span<std::byte>(b.digest_all));
      });
    }
    slot& sl = slots_[static_cast<std::size_t>(s) % nslots_];
    if (sl.used) {
      t_.start_after(sl.released);
    }
    const plan& p = b.sol.plan;
    const auto kept = p.keep(rank_, m);
    const auto recvs = p.receives(rank_, m);
    const auto sends = p.sends(rank_, m);
    const bool route_kept = opt_.exchange_kept_packs;
    std::size_t needed = 0;
    for (const auto& r : recvs) {
      needed += slot::aligned(r.bytes);
    }
    if (route_kept) {
      for (const auto id : kept) {
        needed += slot::aligned(b.packs[static_cast<std::size_t>(id)].bytes);
      }
    }
    if (const auto grown = sl.grow(t_, needed); grown != 0) {
      stats_.buffer_bytes += grown;
      ++stats_.buffer_allocations;
    }
    op& o = take(op_kind::exchange, k, s);
    o.sends.clear();
    o.recvs.clear();
    o.recv_packs.clear();
    auto* arena = static_cast<std::byte*>(sl.arena);
    std::size_t offset = 0;
    const auto add_recv = [&](std::int32_t id, std::int32_t peer, std::int64_t bytes) {
      o.recvs.push_back(recv_op{peer, arena == nullptr ? nullptr : arena + offset, bytes, -1});
      o.recv_packs.push_back(id);
      offset += slot::aligned(bytes);
    };
    for (const auto& r : recvs) {
      add_recv(r.pack, r.peer, r.bytes);
    }
    if (route_kept) {
      for (const auto id : kept) {
        add_recv(id, rank_, b.packs[static_cast<std::size_t>(id)].bytes);
      }
    }
    for (const auto& t : sends) {
      o.sends.push_back(send_op{t.peer, local(b, t.pack).data, t.bytes});
      stats_.bytes_sent += t.bytes;
    }
    if (route_kept) {
      for (const auto id : kept) {
        o.sends.push_back(send_op{rank_, local(b, id).data, local(b, id).bytes});
      }
    }
    sl.views.clear();
    for (const auto id : p.compute(rank_, m)) {
      pack_view v;
      v.pack = id;
      v.source_rank = static_cast<std::int32_t>(id / ppr_);
      v.source_index = static_cast<std::int32_t>(id % ppr_);
      v.bytes = b.packs[static_cast<std::size_t>(id)].bytes;
      v.kept = v.source_rank == rank_ && !route_kept;
      if (v.kept) {
        v.data = local(b, id).data;
      } else {
        for (std::size_t i = 0; i < o.recv_packs.size(); ++i) {
          if (o.recv_packs[i] == id) {
            v.data = o.recvs[i].data;
            stats_.bytes_received += v.bytes;
          }
        }
      }
      sl.views.push_back(v);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      sl.seq = s;
      sl.done = false;
    }
    start(o,
          [&] { t_.start_exchange(o.req, span<const send_op>(o.sends), span<recv_op>(o.recvs)); });
    t_.mark(sl.ready);
  }

  const local_pack& local(const detail::batch_state& b, std::int32_t id) const {
    return b.local[static_cast<std::size_t>(id - rank_ * ppr_)];
  }

  void wait_planned(detail::batch_state& b) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait(lock, [&] { return b.planned || failed_; });
    }
    throw_if_failed();
  }

  // A batch record is reused two batches later; by then the worker is long done with it (its
  // last job came before a later batch's gather, which the caller has waited for).
  void wait_worker_done_with(detail::batch_state& b) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait(lock, [&] { return b.jobs == 0 || failed_; });
    }
    throw_if_failed();
  }
};

} // namespace packswap
