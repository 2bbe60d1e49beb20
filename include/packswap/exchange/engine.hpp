#pragma once

#include "packswap/balance/batch.hpp"
#include "packswap/detail/span.hpp"
#include "packswap/error.hpp"
#include "packswap/exchange/detail/batch.hpp"
#include "packswap/exchange/detail/operations.hpp"
#include "packswap/exchange/detail/receive_slot.hpp"
#include "packswap/exchange/detail/wire.hpp"
#include "packswap/exchange/engine_options.hpp"
#include "packswap/exchange/micro_batch.hpp"
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

namespace packswap {

/// The asynchronous exchange engine of one rank: per global batch it gathers every rank's pack
/// metadata, solves and plans on its worker thread, and exchanges micro-step m+1 (up to
/// `prefetch_depth` ahead) while the caller computes micro-step m.
///
/// ```
/// packswap::threads_transport t(world, rank);  // or mpi_transport, nccl::transport
/// packswap::engine<packswap::threads_transport> e(t, {dp, ga});
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
/// Lifetime and ownership: the transport must outlive the engine. A submitted payload must stay
/// valid and unchanged until `release` of that batch's last micro-step (for stream-ordered
/// transports: until the caller's stream passes it). A `micro_batch` is valid until its `release`.
/// Steady state allocates no payload memory: `prefetch_depth + 1` receive buffers are reused.
///
/// Errors: a failure on the worker (transport error, timeout, mismatch, corrupted pack) aborts
/// the transport so that other ranks fail too, joins the worker, frees the buffers, and is thrown
/// by the caller's next call, with the rank, batch, micro-step and peers in the message; every
/// later call throws it again. Every rank compares digests of the gathered metadata and of its
/// plan (an all-gather of two words per batch), so ranks that disagree all fail with
/// `errc::mismatch`. Host transports hand out nothing before that check, the length check and the
/// payload checksum passed. Stream-ordered transports (NCCL) do not block `acquire` on them: the
/// checks run on the worker as the events complete, and a failure aborts the exchange
/// communicator and is thrown by the next call.
///
/// Thread-safety: one caller thread drives an engine; there is exactly one worker thread, joined
/// on destruction and on every error path. Destroying an engine mid-flight cancels what it
/// started (peers waiting on it see their deadline pass; call `abort` first to fail them now).
template <class Transport>
class engine {
  static_assert(
      is_transport_v<Transport>,
      "engine<T>: T does not model the transport concept (packswap/exchange/transport.hpp)");

 public:
  using transport_type = Transport;
  using stream_type = typename Transport::stream_type;

  /// Starts the worker. Throws `errc::invalid_argument` when `s` is not a valid shape, when
  /// `s.dp` differs from the transport's size, or when an option is out of range.
  engine(Transport& transport, const shape& s, const engine_options& opt = {})
      : t_(transport), shape_(s), opt_(opt), rank_(transport.rank()),
        ppr_(checked(transport, s, opt).packs_per_rank()),
        nslots_(static_cast<std::size_t>(opt.prefetch_depth) + 1),
        checksums_(opt.verify_checksums && Transport::memory == memory_space::host),
        batches_(std::make_unique<detail::batch_state[]>(batch_ring)),
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

  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// Stops and joins the worker, which cancels whatever is in flight, and frees the buffers.
  /// When it returns, no operation of this rank touches the payloads any more (see the class
  /// comment for stream-ordered transports and stray operations). Never throws.
  ~engine() {
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
  /// cancelled everything in flight. From then on no transport operation of this rank reads a
  /// payload or writes a buffer it handed out, and no other rank reads this rank's payloads
  /// (within the transport's own limits: see the class comment), so they may be freed at once.
  /// For catch blocks around a training step; may also come from another thread (a watchdog),
  /// where a call the driving thread is making then throws the error.
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
  engine_stats stats() const {
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

  std::int32_t rank() const noexcept { return rank_; }
  const shape& batch_shape() const noexcept { return shape_; }

 private:
  static constexpr std::size_t batch_ring = 3; // current, next, and one being recycled
  static constexpr auto slice = std::chrono::milliseconds(10);

  using op = detail::operation<Transport>;
  using op_kind = detail::op_kind;
  using slot = detail::receive_slot<Transport>;

  static const shape& checked(const Transport& t, const shape& s, const engine_options& opt) {
    validate(s);
    PACKSWAP_EXPECTS(t.size() == s.dp, errc::invalid_argument,
                     "the transport has " << t.size() << " ranks, the shape has dp = " << s.dp);
    PACKSWAP_EXPECTS(opt.prefetch_depth >= 1 && opt.prefetch_depth <= 64, errc::invalid_argument,
                     "prefetch_depth is " << opt.prefetch_depth << ", must be in [1, 64]");
    PACKSWAP_EXPECTS(opt.timeout.count() > 0, errc::invalid_argument,
                     "timeout is " << opt.timeout.count() << " ms, must be positive");
    return s;
  }

  detail::batch_state& batch(std::int64_t k) {
    return batches_[static_cast<std::size_t>(k) % batch_ring];
  }

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
    detail::batch_state& b = batch(o.batch);
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
  // lock (a cancel may wait for copies in progress, or for other ranks to drain).
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
  std::unique_ptr<detail::batch_state[]> batches_;
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
  detail::operation_pool<Transport> ops_;
  std::exception_ptr error_; // the first failure, rethrown by every later call
  bool worker_exited_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::mutex join_mutex_; // serializes joining the worker

  // Worker only.
  packswap::solver solver_; // keeps its working memory from batch to batch

  std::thread worker_; // last: started when everything above exists
};

} // namespace packswap
