#pragma once

#include "packswap/balance/batch.hpp"
#include "packswap/detail/digest.hpp"
#include "packswap/detail/span.hpp"
#include "packswap/error.hpp"
#include "packswap/exchange/detail/wire.hpp"
#include "packswap/exchange/transport.hpp"
#include "packswap/solve.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace packswap {

/// One pack this rank's loader produced, handed to `engine::submit`.
struct local_pack {
  std::int64_t cost = 0;      ///< compute cost in the cost model's integer unit, >= 0
  std::int64_t bytes = 0;     ///< payload size, >= 0
  const void* data = nullptr; ///< payload, in the transport's memory space (may be null if empty)
};

/// One pack of the caller's cell, as `engine::acquire` hands it out.
struct pack_view {
  std::int32_t pack = 0;         ///< pack id in the global batch (`source_rank * ga * mbs + index`)
  std::int32_t source_rank = 0;  ///< the rank whose loader produced it
  std::int32_t source_index = 0; ///< its index in that rank's `submit()`
  std::int64_t bytes = 0;        ///< payload size
  const void* data = nullptr;    ///< payload (host or device pointer, per the transport)
  bool kept = false;             ///< true: the caller's own submitted buffer, used in place
};

/// The packs of one (rank, micro-step) cell, valid until `engine::release` of that micro-step.
struct micro_batch {
  std::int64_t batch = 0;                       ///< global batch index (0, 1, ... in submit order)
  std::int32_t micro_step = 0;                  ///< micro-step in the batch, in execution order
  span<const pack_view> packs;                  ///< ascending pack id; `mbs` entries
  const packswap::solution* solution = nullptr; ///< the batch's solution (balance, movement, plan)
};

/// Options of an `engine`. Every rank must use the same values.
struct engine_options {
  /// Micro-steps exchanged ahead of the one being computed (>= 1). Memory: `prefetch_depth + 1`
  /// receive buffers, each sized for the largest micro-step seen.
  std::int32_t prefetch_depth = 1;
  /// Let the first exchanges of the next global batch run during the last micro-steps of the
  /// current one (needs the next batch `submit`ted before then).
  bool prefetch_across_batches = true;
  /// How long one transport operation may take once the worker waits for it before it fails with
  /// `errc::timeout`. Must exceed the longest time ranks drift apart (about one micro-step).
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  /// Host transports: checksum every payload at `submit` and verify every received pack before
  /// `acquire` hands it out. Ignored (no checksums) for device memory.
  bool verify_checksums = true;
  /// Route the packs a rank keeps through the transport as self-sends too (a test option: on one
  /// GPU it makes every pack cross NCCL). Off: kept packs are used in place, never copied.
  bool exchange_kept_packs = false;
  /// The solver's options.
  solve_options solver{};
};

/// Counters of one engine, for tests and monitoring.
struct engine_stats {
  std::int64_t batches_submitted = 0;
  std::int64_t micro_steps_released = 0;
  std::int64_t packs_kept = 0;     ///< handed out in place
  std::int64_t packs_received = 0; ///< handed out from a receive buffer
  std::int64_t bytes_received = 0;
  std::int64_t bytes_sent = 0;
  std::int64_t buffer_allocations = 0;  ///< receive-buffer (re)allocations since construction
  std::int64_t buffer_bytes = 0;        ///< receive-buffer bytes held now
  std::int64_t request_allocations = 0; ///< transport requests created since construction
  bool worker_running = false;          ///< false once the worker was joined (after an error)
  /// Operations the transport could not stop within its deadline after an error (MPI: a rank
  /// that neither took nor drained them). While not zero, the payloads of the batches in flight
  /// may still be read, and the engine keeps its receive buffers rather than free them.
  std::int64_t stray_operations = 0;
  std::int32_t ctas = 0; ///< exchange CTA limit in force (0: transport default)
};

namespace detail {

// Optional transport members through which a GPU backend measures compute time and picks its
// CTA limit (see packswap/nccl/transport.hpp); host transports do not have them.
template <class T, class = void>
struct has_tuning : std::false_type {};
template <class T>
struct has_tuning<
    T, void_t<decltype(std::declval<T&>().compute_begin(std::declval<typename T::stream_type>())),
              decltype(std::declval<T&>().compute_end(std::declval<typename T::stream_type>())),
              decltype(std::declval<T&>().compute_ns()),
              decltype(std::declval<T&>().tune(std::int64_t{}, std::int64_t{})),
              decltype(std::declval<const T&>().ctas())>> : std::true_type {};

// Optional transport member: operations it could not stop when they were cancelled (see
// packswap/mpi/transport.hpp). While any remain, their buffers may still be used.
template <class T, class = void>
struct has_strays : std::false_type {};
template <class T>
struct has_strays<T, void_t<decltype(std::declval<const T&>().stray_operations())>>
    : std::true_type {};

/// The message of `e` without its `packswap [code]: ` prefix, for wrapping it in more context.
inline std::string message_of(const std::exception& e) {
  const std::string what = e.what();
  const auto cut = what.find("]: ");
  return what.rfind("packswap [", 0) == 0 && cut != std::string::npos ? what.substr(cut + 3) : what;
}

} // namespace detail

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
      : t_(transport), shape_(s), opt_(opt), rank_(transport.rank()) {
    validate(s);
    PACKSWAP_EXPECTS(transport.size() == s.dp, errc::invalid_argument,
                     "the transport has " << transport.size()
                                          << " ranks, the shape has dp = " << s.dp);
    PACKSWAP_EXPECTS(opt.prefetch_depth >= 1 && opt.prefetch_depth <= 64, errc::invalid_argument,
                     "prefetch_depth is " << opt.prefetch_depth << ", must be in [1, 64]");
    PACKSWAP_EXPECTS(opt.timeout.count() > 0, errc::invalid_argument,
                     "timeout is " << opt.timeout.count() << " ms, must be positive");
    checksums_ = opt.verify_checksums && Transport::memory == memory_space::host;
    ppr_ = s.packs_per_rank();
    nslots_ = static_cast<std::size_t>(opt.prefetch_depth) + 1;
    batches_ = std::make_unique<batch_state[]>(batch_ring);
    for (std::size_t i = 0; i < batch_ring; ++i) {
      auto& b = batches_[i];
      b.local.reserve(static_cast<std::size_t>(ppr_));
      b.gather_mine.resize(detail::meta_block_bytes(ppr_));
      b.gather_all.resize(detail::meta_block_bytes(ppr_) * static_cast<std::size_t>(s.dp));
      b.packs.resize(static_cast<std::size_t>(s.packs()));
      b.sums.resize(static_cast<std::size_t>(s.packs()));
      b.checksummed.resize(static_cast<std::size_t>(s.dp));
      b.digest_mine.resize(digest_block);
      b.digest_all.resize(digest_block * static_cast<std::size_t>(s.dp));
    }
    slots_ = std::make_unique<slot_state[]>(nslots_);
    for (std::size_t i = 0; i < nslots_; ++i) {
      slots_[i].views.reserve(static_cast<std::size_t>(s.mbs));
    }
    // Enough requests for the usual steady state: a window of exchanges plus the gathers and
    // digest checks of the batches in flight.
    for (std::size_t i = 0; i < nslots_ + 2 * batch_ring; ++i) {
      free_.push_back(new_record());
    }
    queue_.reserve(free_.size());
    worker_ = std::thread([this] { run(); });
  }

  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// Stops and joins the worker, cancels whatever is in flight and frees the buffers. Never
  /// throws.
  ~engine() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_all();
    join_worker();
    free_buffers();
    if (strays()) {
      // Operations the transport could not stop may still write into the batches' gather
      // buffers and the receive buffers: leave them allocated.
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

  /// Gives up: fails this engine with `errc::cancelled` and aborts the transport, so that the
  /// other ranks fail now instead of at their deadline. For catch blocks around a training step.
  void abort(const std::string& reason) noexcept {
    try {
      fail(error(errc::cancelled, "rank " + std::to_string(rank_) + " gave up: " + reason));
    } catch (...) {
      fail(error(errc::cancelled, "gave up"));
    }
    // The worker cancels everything in flight on its way out, and a transport's cancel returns
    // only once nothing reads or writes that operation's buffers.
    join_worker();
  }

  /// Counters; from the caller's thread.
  engine_stats stats() const {
    engine_stats out = stats_;
    out.batches_submitted = submitted_;
    std::lock_guard<std::mutex> lock(mutex_);
    out.worker_running = !worker_exited_;
    out.request_allocations = request_allocations_;
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
  static constexpr std::size_t digest_block = 16;
  static constexpr std::size_t alignment = 256;
  static constexpr auto slice = std::chrono::milliseconds(10);

  enum class job : std::uint8_t { gather, digest, exchange };

  // One started transport operation and what the worker needs to finish it.
  struct record {
    typename Transport::request req;
    std::vector<send_op> sends;
    std::vector<recv_op> recvs;
    std::vector<std::int32_t> recv_packs;
    job kind = job::exchange;
    std::int64_t batch = 0;
    std::int64_t seq = -1;
    deadline due{};
  };

  struct batch_state {
    std::int64_t index = -1;
    std::vector<local_pack> local;
    std::vector<std::byte> gather_mine, gather_all;
    std::vector<pack_meta> packs;
    std::vector<std::uint64_t> sums;
    std::vector<bool> checksummed;
    packswap::solution sol;
    std::vector<std::byte> digest_mine, digest_all;
    std::int64_t tune_bytes = 0;
    std::int64_t tune_ns = 0;
    std::int64_t jobs = 0; // started and not finished by the worker (guarded)
    bool planned = false;  // guarded
    bool verified = false; // guarded
  };

  struct slot_state {
    std::int64_t seq = -1;
    void* arena = nullptr;
    std::size_t capacity = 0;
    std::vector<pack_view> views;
    typename Transport::fence ready, released;
    bool used = false;
    bool done = false; // guarded
  };

  batch_state& batch(std::int64_t k) { return batches_[static_cast<std::size_t>(k) % batch_ring]; }

  // Runs the part of a call that changes the engine's state. Whatever it throws fails the engine
  // first (the transport is aborted, the worker cancels what is in flight and is joined), so that
  // when the exception reaches the caller nothing this rank started touches the caller's memory.
  template <class F>
  decltype(auto) guarded(F&& f) {
    try {
      return f();
    } catch (const error& e) {
      fail(e);
    } catch (const std::exception& e) {
      fail(error(errc::internal, e.what()));
    }
    throw_if_failed();
    PACKSWAP_FAIL(errc::internal, "rank " << rank_ << ": a failed call did not fail the engine");
  }

  // submit() once its arguments were checked.
  void start_batch(span<const local_pack> packs) {
    const std::int64_t k = submitted_;
    batch_state& b = batch(k);
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
    auto rec = take_record(job::gather, k, -1);
    auto& req = rec->req;
    start(std::move(rec), [&] {
      t_.start_all_gather(req, span<const std::byte>(b.gather_mine), span<std::byte>(b.gather_all));
    });
    ++submitted_;
    pump();
  }

  // acquire() once its arguments were checked.
  micro_batch hand_out(std::int32_t micro_step, stream_type stream) {
    const std::int64_t s = released_;
    const std::int64_t k = s / shape_.ga;
    pump();
    slot_state& slot = slots_[static_cast<std::size_t>(s) % nslots_];
    PACKSWAP_EXPECTS(slot.seq == s, errc::internal,
                     "rank " << rank_ << ": micro-step " << s << " was not started");
    batch_state& b = batch(k);
    if constexpr (Transport::stream_ordered) {
      t_.wait_fence(slot.ready, stream);
    } else {
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait(lock, [&] { return (slot.done && b.verified) || failed_; });
    }
    throw_if_failed();
    if constexpr (detail::has_tuning<Transport>::value) {
      t_.compute_begin(stream);
    }
    held_ = true;
    for (const auto& v : slot.views) {
      (v.kept ? stats_.packs_kept : stats_.packs_received) += 1;
    }
    return micro_batch{k, micro_step, span<const pack_view>(slot.views), &b.sol};
  }

  // release() once its arguments were checked.
  void take_back(stream_type stream) {
    const std::int64_t s = released_;
    slot_state& slot = slots_[static_cast<std::size_t>(s) % nslots_];
    if constexpr (detail::has_tuning<Transport>::value) {
      t_.compute_end(stream);
    }
    t_.record(slot.released, stream);
    slot.used = true;
    held_ = false;
    ++released_;
    ++stats_.micro_steps_released;
    pump();
  }

  // Under mutex_ (or in the constructor).
  std::unique_ptr<record> new_record() {
    ++request_allocations_;
    return std::make_unique<record>();
  }

  std::unique_ptr<record> take_record(job kind, std::int64_t k, std::int64_t seq) {
    std::unique_ptr<record> rec;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (free_.empty()) {
        rec = new_record();
      } else {
        rec = std::move(free_.back());
        free_.pop_back();
      }
    }
    rec->kind = kind;
    rec->batch = k;
    rec->seq = seq;
    return rec;
  }

  // Under mutex_.
  void give_back(record* rec) { free_.push_back(std::unique_ptr<record>(rec)); }

  // Starts an operation on the caller's thread and queues it for the worker. A failure to start
  // fails the engine; an engine that failed meanwhile cancels what was just started.
  template <class Start>
  void start(std::unique_ptr<record> owned, Start&& start_op) {
    record* rec = owned.get();
    try {
      start_op();
    } catch (const std::exception& e) {
      fail(error(code_of(e), context(*rec) + ": " + detail::message_of(e)));
      throw_if_failed();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (failed_) {
      lock.unlock();
      t_.cancel(rec->req);
      throw_if_failed();
    }
    ++batch(rec->batch).jobs;
    queue_.push_back(owned.release());
    lock.unlock();
    work_cv_.notify_one();
  }

  static errc code_of(const std::exception& e) {
    const auto* pe = dynamic_cast<const error*>(&e);
    return pe != nullptr ? pe->code() : errc::internal;
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
    batch_state& b = batch(k);
    if (m == 0) {
      wait_planned(b);
      if constexpr (detail::has_tuning<Transport>::value) {
        t_.tune(b.tune_bytes, b.tune_ns);
      }
      auto d = take_record(job::digest, k, -1);
      auto& req = d->req;
      start(std::move(d), [&] {
        t_.start_all_gather(req, span<const std::byte>(b.digest_mine),
                            span<std::byte>(b.digest_all));
      });
    }
    slot_state& slot = slots_[static_cast<std::size_t>(s) % nslots_];
    if (slot.used) {
      t_.start_after(slot.released);
    }
    const plan& p = b.sol.plan;
    const auto kept = p.keep(rank_, m);
    const auto recvs = p.receives(rank_, m);
    const auto sends = p.sends(rank_, m);
    const bool route_kept = opt_.exchange_kept_packs;
    std::size_t needed = 0;
    for (const auto& r : recvs) {
      needed += align(r.bytes);
    }
    if (route_kept) {
      for (const auto id : kept) {
        needed += align(b.packs[static_cast<std::size_t>(id)].bytes);
      }
    }
    grow(slot, needed);
    auto owned = take_record(job::exchange, k, s);
    record* rec = owned.get();
    rec->sends.clear();
    rec->recvs.clear();
    rec->recv_packs.clear();
    auto* arena = static_cast<std::byte*>(slot.arena);
    std::size_t offset = 0;
    const auto add_recv = [&](std::int32_t id, std::int32_t peer, std::int64_t bytes) {
      rec->recvs.push_back(recv_op{peer, arena == nullptr ? nullptr : arena + offset, bytes, -1});
      rec->recv_packs.push_back(id);
      offset += align(bytes);
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
      rec->sends.push_back(send_op{t.peer, local(b, t.pack).data, t.bytes});
      stats_.bytes_sent += t.bytes;
    }
    if (route_kept) {
      for (const auto id : kept) {
        rec->sends.push_back(send_op{rank_, local(b, id).data, local(b, id).bytes});
      }
    }
    slot.views.clear();
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
        for (std::size_t i = 0; i < rec->recv_packs.size(); ++i) {
          if (rec->recv_packs[i] == id) {
            v.data = rec->recvs[i].data;
            stats_.bytes_received += v.bytes;
          }
        }
      }
      slot.views.push_back(v);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slot.seq = s;
      slot.done = false;
    }
    start(std::move(owned), [&] {
      t_.start_exchange(rec->req, span<const send_op>(rec->sends), span<recv_op>(rec->recvs));
    });
    t_.mark(slot.ready);
  }

  const local_pack& local(const batch_state& b, std::int32_t id) const {
    return b.local[static_cast<std::size_t>(id - rank_ * ppr_)];
  }

  static std::size_t align(std::int64_t bytes) {
    return (static_cast<std::size_t>(bytes) + alignment - 1) / alignment * alignment;
  }

  // Grows a receive buffer to `needed` bytes, by at least half its size so that a batch
  // distribution with a bounded maximum stops allocating after a few batches.
  void grow(slot_state& slot, std::size_t needed) {
    if (needed <= slot.capacity) {
      return;
    }
    std::size_t bytes = std::max(needed, slot.capacity + slot.capacity / 2);
    bytes = (bytes + 4095) / 4096 * 4096;
    if (slot.arena != nullptr) {
      t_.deallocate(slot.arena, slot.capacity);
      stats_.buffer_bytes -= static_cast<std::int64_t>(slot.capacity);
      slot.arena = nullptr;
      slot.capacity = 0;
    }
    slot.arena = t_.allocate(bytes);
    slot.capacity = bytes;
    stats_.buffer_bytes += static_cast<std::int64_t>(bytes);
    ++stats_.buffer_allocations;
  }

  // Caller's thread, once the worker is gone: no transport operation touches the buffers.
  void free_buffers() noexcept {
    if (!slots_ || strays()) {
      return; // the transport may still write into them: they stay allocated
    }
    for (std::size_t i = 0; i < nslots_; ++i) {
      auto& slot = slots_[i];
      if (slot.arena != nullptr) {
        if (slot.used) {
          t_.start_after(slot.released); // a GPU stream may still read it: free in order
        }
        t_.deallocate(slot.arena, slot.capacity);
        stats_.buffer_bytes -= static_cast<std::int64_t>(slot.capacity);
        slot.arena = nullptr;
        slot.capacity = 0;
      }
    }
  }

  bool strays() const noexcept {
    if constexpr (detail::has_strays<Transport>::value) {
      return t_.stray_operations() > 0;
    } else {
      return false;
    }
  }

  void wait_planned(batch_state& b) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait(lock, [&] { return b.planned || failed_; });
    }
    throw_if_failed();
  }

  // A batch record is reused two batches later; by then the worker is long done with it (its
  // last job came before a later batch's gather, which the caller has waited for).
  void wait_worker_done_with(batch_state& b) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait(lock, [&] { return b.jobs == 0 || failed_; });
    }
    throw_if_failed();
  }

  void throw_if_failed() {
    if (!failed_.load()) {
      return;
    }
    join_worker();
    free_buffers();
    std::lock_guard<std::mutex> lock(mutex_);
    throw *error_;
  }

  // Any thread (abort may come from a watchdog while the caller's thread fails too).
  void join_worker() noexcept {
    work_cv_.notify_all();
    std::lock_guard<std::mutex> lock(join_mutex_);
    if (worker_.joinable()) {
      worker_.join();
    }
  }

  // Any thread. The first error wins; it aborts the transport so that the other ranks fail too.
  void fail(const error& e) noexcept {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) {
        error_.emplace(e);
        first = true;
      }
    }
    // The transport is aborted before the worker learns of the failure: the worker's cancels may
    // abort it too (a transport that cannot withdraw an operation does), and the other ranks must
    // hear this error, not that one.
    if (first) {
      try {
        t_.abort(e.code(), detail::message_of(e));
      } catch (...) {
        t_.abort(e.code(), "engine failure");
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      failed_ = true;
    }
    done_cv_.notify_all();
    work_cv_.notify_all();
  }

  std::string context(const record& rec) const {
    std::ostringstream os;
    os << "rank " << rank_ << ", batch " << rec.batch;
    if (rec.kind == job::gather) {
      os << ", metadata all-gather";
    } else if (rec.kind == job::digest) {
      os << ", digest all-gather";
    } else {
      os << ", micro-step " << rec.seq % shape_.ga << ", peers ";
      std::vector<std::int32_t> peers;
      for (const auto& op : rec.sends) {
        peers.push_back(op.peer);
      }
      for (const auto& op : rec.recvs) {
        peers.push_back(op.peer);
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
    bool stopped = false;
    try {
      while (!stopped) {
        record* rec = next_job();
        if (rec == nullptr) {
          break;
        }
        if (Transport::stream_ordered && rec->kind == job::exchange) {
          // Stream-ordered exchanges need nothing from the host: watch them for errors and the
          // deadline while gathers go on.
          rec->due = exchange_clock::now() + opt_.timeout;
          pop_front();
          watch_.push_back(rec);
          continue;
        }
        if (!wait_for(*rec)) {
          stopped = true;
          break;
        }
        finish(*rec);
      }
    } catch (const std::exception& e) {
      fail(error(code_of(e), detail::message_of(e)));
    }
    cancel_all();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      worker_exited_ = true;
    }
    done_cv_.notify_all();
  }

  // The oldest queued operation (left in the queue until finished, so that a failure cancels it),
  // or null on stop or failure.
  record* next_job() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (stop_ || failed_) {
        return nullptr;
      }
      if (head_ < queue_.size()) {
        return queue_[head_];
      }
      if (watch_.empty()) {
        work_cv_.wait(lock);
      } else {
        lock.unlock();
        poll_watch();
        lock.lock();
        if (head_ == queue_.size() && !stop_ && !failed_ && !watch_.empty()) {
          work_cv_.wait_for(lock, std::chrono::microseconds(200));
        }
      }
    }
  }

  void pop_front() {
    std::lock_guard<std::mutex> lock(mutex_);
    pop_front_locked();
  }

  // Compacts in place: the queue never allocates once it reached its usual length.
  void pop_front_locked() {
    ++head_;
    if (head_ * 2 >= queue_.size()) {
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

  // Waits for `rec` in slices, so that destruction never waits for a deadline. False on stop.
  bool wait_for(record& rec) {
    const deadline due = exchange_clock::now() + opt_.timeout;
    for (;;) {
      if (stop_ || failed_) {
        return false;
      }
      const deadline until = std::min(due, exchange_clock::now() + slice);
      bool done = false;
      try {
        done = t_.wait(rec.req, until);
      } catch (const std::exception& e) {
        throw error(code_of(e), context(rec) + ": " + detail::message_of(e));
      }
      if (done) {
        return true;
      }
      if (Transport::stream_ordered) {
        poll_watch();
      }
      if (exchange_clock::now() >= due) {
        PACKSWAP_FAIL(errc::timeout, context(rec) << ": did not complete within "
                                                  << opt_.timeout.count() << " ms");
      }
    }
  }

  // Stream-ordered exchanges: retire the completed ones, fail on error or past their deadline.
  void poll_watch() {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < watch_.size(); ++i) {
      record* rec = watch_[i];
      bool done = false;
      try {
        done = t_.wait(rec->req, exchange_clock::now());
      } catch (const std::exception& e) {
        throw error(code_of(e), context(*rec) + ": " + detail::message_of(e));
      }
      if (done) {
        std::lock_guard<std::mutex> lock(mutex_);
        --batch(rec->batch).jobs;
        mark_done(*rec);
        give_back(rec);
        done_cv_.notify_all();
        continue;
      }
      if (exchange_clock::now() >= rec->due) {
        PACKSWAP_FAIL(errc::timeout, context(*rec) << ": did not complete within "
                                                   << opt_.timeout.count() << " ms");
      }
      watch_[kept++] = rec;
    }
    watch_.resize(kept);
  }

  // Under mutex_. A stream-ordered slot may already hold a later micro-step (the caller reuses it
  // once the stream passed its release, without waiting for the worker to notice).
  void mark_done(const record& rec) {
    auto& slot = slots_[static_cast<std::size_t>(rec.seq) % nslots_];
    if (slot.seq == rec.seq) {
      slot.done = true;
    }
  }

  void finish(record& rec) {
    batch_state& b = batch(rec.batch);
    if (rec.kind == job::gather) {
      on_gathered(b, rec);
    } else if (rec.kind == job::digest) {
      on_digests(b, rec);
    } else {
      verify(b, rec);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (rec.kind == job::gather) {
      b.planned = true;
    } else if (rec.kind == job::digest) {
      b.verified = true;
    } else {
      mark_done(rec);
    }
    --b.jobs;
    pop_front_locked();
    give_back(&rec);
    done_cv_.notify_all();
  }

  void on_gathered(batch_state& b, const record& rec) {
    const std::size_t block = detail::meta_block_bytes(ppr_);
    std::int64_t min_ns = 0;
    for (std::int32_t r = 0; r < shape_.dp; ++r) {
      const std::byte* in = b.gather_all.data() + static_cast<std::size_t>(r) * block;
      const auto h = detail::get_header(in, r, rank_, static_cast<std::uint64_t>(b.index),
                                        static_cast<std::uint64_t>(ppr_));
      const auto ns = static_cast<std::int64_t>(h.compute_ns);
      if (ns > 0 && (min_ns == 0 || ns < min_ns)) {
        min_ns = ns;
      }
      b.checksummed[static_cast<std::size_t>(r)] =
          (h.flags & detail::meta_header::checksummed) != 0;
      for (std::int64_t i = 0; i < ppr_; ++i) {
        const std::byte* p = in + detail::meta_header_bytes +
                             static_cast<std::size_t>(i) * detail::meta_record_bytes;
        const auto id = static_cast<std::size_t>(r * ppr_ + i);
        b.packs[id] = pack_meta{static_cast<std::int64_t>(detail::get_u64(p)),
                                static_cast<std::int64_t>(detail::get_u64(p + 8)), r};
        b.sums[id] = detail::get_u64(p + 16);
      }
    }
    try {
      solver_.solve(span<const pack_meta>(b.packs), shape_, opt_.solver, b.sol);
    } catch (const std::exception& e) {
      throw error(code_of(e), context(rec) + ": the gathered metadata is not a valid batch: " +
                                  detail::message_of(e));
    }
    detail::digest meta;
    meta.bytes(reinterpret_cast<const unsigned char*>(b.gather_all.data()), b.gather_all.size());
    detail::put_u64(b.digest_mine.data(), meta.value());
    detail::put_u64(b.digest_mine.data() + 8, b.sol.plan.digest());
    std::int64_t most = 0;
    for (std::int32_t r = 0; r < shape_.dp; ++r) {
      for (std::int32_t m = 0; m < shape_.ga; ++m) {
        most = std::max({most, b.sol.plan.send_bytes(r, m), b.sol.plan.receive_bytes(r, m)});
      }
    }
    b.tune_bytes = most;
    b.tune_ns = min_ns;
  }

  void on_digests(batch_state& b, const record& rec) const {
    const std::uint64_t meta = detail::get_u64(b.digest_mine.data());
    const std::uint64_t plan = detail::get_u64(b.digest_mine.data() + 8);
    std::ostringstream differ;
    int shown = 0;
    for (std::int32_t r = 0; r < shape_.dp; ++r) {
      const std::byte* in = b.digest_all.data() + static_cast<std::size_t>(r) * digest_block;
      const auto their_meta = detail::get_u64(in);
      const auto their_plan = detail::get_u64(in + 8);
      if ((their_meta != meta || their_plan != plan) && shown < 8) {
        differ << (shown ? "; " : "") << "rank " << r << " has metadata digest 0x" << std::hex
               << their_meta << " and plan digest 0x" << their_plan << std::dec;
        ++shown;
      }
    }
    PACKSWAP_EXPECTS(shown == 0, errc::mismatch,
                     context(rec) << ": ranks disagree on the gathered metadata or the plan: this "
                                  << "rank has metadata digest 0x" << std::hex << meta
                                  << " and plan digest 0x" << plan << std::dec << ", "
                                  << differ.str());
  }

  // Host memory: nothing that arrived short, long or altered is handed out.
  void verify(const batch_state& b, const record& rec) const {
    for (std::size_t i = 0; i < rec.recvs.size(); ++i) {
      const auto& r = rec.recvs[i];
      const auto id = rec.recv_packs[i];
      PACKSWAP_EXPECTS(r.received == r.bytes, errc::mismatch,
                       context(rec)
                           << ": pack " << id << " from rank " << r.peer << " arrived with "
                           << r.received << " bytes, expected " << r.bytes);
      if (checksums_ && b.checksummed[static_cast<std::size_t>(r.peer)]) {
        const auto sum = detail::payload_checksum(r.data, static_cast<std::size_t>(r.bytes));
        PACKSWAP_EXPECTS(sum == b.sums[static_cast<std::size_t>(id)], errc::mismatch,
                         context(rec)
                             << ": pack " << id << " from rank " << r.peer
                             << " is corrupted: checksum 0x" << std::hex << sum
                             << ", its source sent 0x" << b.sums[static_cast<std::size_t>(id)]);
      }
    }
  }

  // Worker, on its way out: nothing it was given may still touch a buffer.
  void cancel_all() noexcept {
    std::vector<record*> pending;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      try {
        pending.assign(queue_.begin() + static_cast<std::ptrdiff_t>(head_), queue_.end());
      } catch (...) {
        // Out of memory: cancel them one by one below, under the lock.
        for (std::size_t i = head_; i < queue_.size(); ++i) {
          t_.cancel(queue_[i]->req);
        }
      }
    }
    for (record* rec : pending) {
      t_.cancel(rec->req);
    }
    for (record* rec : watch_) {
      t_.cancel(rec->req);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = head_; i < queue_.size(); ++i) {
      --batch(queue_[i]->batch).jobs;
      give_back(queue_[i]);
    }
    queue_.clear();
    head_ = 0;
    for (record* rec : watch_) {
      --batch(rec->batch).jobs;
      give_back(rec);
    }
    watch_.clear();
  }

  Transport& t_;
  shape shape_;
  engine_options opt_;
  std::int32_t rank_;
  std::int64_t ppr_ = 0;
  std::size_t nslots_ = 0;
  bool checksums_ = false;
  std::unique_ptr<batch_state[]> batches_;
  std::unique_ptr<slot_state[]> slots_;

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
  std::vector<std::unique_ptr<record>> free_;
  std::vector<record*> queue_;
  std::size_t head_ = 0;
  std::int64_t request_allocations_ = 0;
  std::optional<error> error_;
  bool worker_exited_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::mutex join_mutex_; // serializes joining the worker

  // Worker only.
  std::vector<record*> watch_;
  packswap::solver solver_; // keeps its working memory from batch to batch

  std::thread worker_; // last: started when everything above exists
};

} // namespace packswap
