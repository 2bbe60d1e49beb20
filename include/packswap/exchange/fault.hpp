#pragma once

#include "packswap/detail/prng.hpp"
#include "packswap/error.hpp"
#include "packswap/exchange/transport.hpp"
#include "packswap/span.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>

namespace packswap {

/// What a `fault_injecting_transport` does wrong.
enum class fault_kind {
  none,         ///< nothing: a pass-through
  fail,         ///< the operation completes with `errc::transport` ("a peer that returns an error")
  hang,         ///< the operation is never started and never completes ("a peer that hangs")
  short_data,   ///< one received buffer reports one byte less than was sent
  corrupt_data, ///< one received buffer has a byte flipped
  alter_metadata, ///< the gathered block of another rank has one byte changed on this rank only
};

/// Which operations a fault counts.
enum class fault_target {
  exchange,   ///< `start_exchange` calls
  all_gather, ///< `start_all_gather` calls (the metadata gather of batch k and its digest check)
};

/// A fault and when it fires: at the `at`-th (0-based) operation of `target` on this rank.
/// `short_data` and `corrupt_data` fire at the first such operation with a non-empty receive.
struct fault {
  fault_kind kind = fault_kind::none;           ///< what goes wrong (`none`: nothing)
  fault_target target = fault_target::exchange; ///< which operations count
  std::int64_t at = 0;                          ///< the 0-based operation it fires at
  std::string message = "injected failure";     ///< the error message of `fault_kind::fail`
};

/// Random pauses a `fault_injecting_transport` adds, as a slow host or network would: before it
/// starts an operation (on the thread that starts it) and before each wait (on the thread that
/// waits), each with probability `percent` / 100 and a length uniform in [0, `max`]. The pauses
/// follow from `seed`, but where they fall relative to other threads does not.
struct jitter {
  std::chrono::microseconds max{0}; ///< longest pause
  std::int32_t percent = 0;         ///< chance of a pause before each start or wait, in percent
  std::uint64_t seed = 0;           ///< seeds the pauses' lengths and whether they happen
};

/// A transport that forwards to `Inner` and injects one `fault`: the reliability tests' tool for
/// showing that every fault ends, on every rank, in a clear `packswap::error` within the engine's
/// deadline, with the worker joined, buffers freed and no wrong pack handed out.
///
/// ```
/// packswap::threads::transport inner(world, rank);
/// packswap::fault_injecting_transport<packswap::threads::transport> t(
///     inner, rank == 1 ? packswap::fault{packswap::fault_kind::hang, {}, 5} : packswap::fault{});
/// packswap::engine<decltype(t)> e(t, shape, opt); // rank 1 stops answering at its 6th exchange
/// ```
///
/// Ownership: refers to `inner`, which must outlive it. Thread-safety: that of `Inner`.
template <class Inner>
class fault_injecting_transport {
 public:
  /// @name Transport concept
  /// @{

  /// The transport concept's members (see `is_transport_v`): `Inner`'s, with the fault
  /// injected into the operations it targets.
  using stream_type = typename Inner::stream_type;
  using fence = typename Inner::fence;
  static constexpr memory_space memory = Inner::memory;
  static constexpr bool stream_ordered = Inner::stream_ordered;

  /// @}

  /// The completion handle of one operation.
  class request {
   public:
    request() = default;
    request(const request&) = delete;
    request& operator=(const request&) = delete;

   private:
    friend class fault_injecting_transport;
    typename Inner::request inner_;
    fault_kind fault_ = fault_kind::none; // the fault this operation carries
    bool hung_ = false;
    span<recv_op> recvs_;
    span<std::byte> gathered_;
    std::size_t block_ = 0;
  };

  /// Forwards to `inner`, which must outlive this transport, injects `f` and pauses its starts
  /// and waits as `j` says.
  fault_injecting_transport(Inner& inner, fault f = {}, jitter j = {})
      : inner_(&inner), fault_(std::move(f)), jitter_(j), start_rng_(j.seed),
        wait_rng_(j.seed ^ 0x5bd1e995u) {}

  /// @name Transport concept
  /// @{

  /// The transport concept's members (see `is_transport_v`): `Inner`'s, with the fault
  /// injected into the operations it targets.
  [[nodiscard]] std::int32_t rank() const noexcept { return inner_->rank(); }
  [[nodiscard]] std::int32_t size() const noexcept { return inner_->size(); }
  /// @}

  /// True once the fault fired.
  [[nodiscard]] bool fired() const noexcept { return fired_.load(); }

  /// @name Transport concept
  /// @{

  /// The transport concept's members (see `is_transport_v`): `Inner`'s, with the fault
  /// injected into the operations it targets.
  void start_all_gather(request& req, span<const std::byte> mine, span<std::byte> all) {
    pause(start_rng_);
    arm(req, fault_target::all_gather, gathers_++, true);
    req.gathered_ = all;
    req.block_ = mine.size();
    req.recvs_ = {};
    if (!req.hung_) {
      inner_->start_all_gather(req.inner_, mine, all);
    }
  }

  void start_exchange(request& req, span<const send_op> sends, span<recv_op> recvs) {
    pause(start_rng_);
    bool eligible = true;
    if (fault_.kind == fault_kind::short_data || fault_.kind == fault_kind::corrupt_data) {
      eligible = first_nonempty(recvs) != nullptr;
    }
    arm(req, fault_target::exchange, exchanges_++, eligible);
    req.recvs_ = recvs;
    req.gathered_ = {};
    if (!req.hung_) {
      inner_->start_exchange(req.inner_, sends, recvs);
    }
  }

  [[nodiscard]] bool wait(request& req, deadline until) {
    pause(wait_rng_);
    if (req.hung_) {
      // A peer that hangs answers nothing, ever; sleep in short steps so that destruction and
      // abort are still prompt.
      while (exchange_clock::now() < until && !aborted_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return false;
    }
    if (!inner_->wait(req.inner_, until)) {
      return false;
    }
    switch (req.fault_) {
    case fault_kind::fail:
      PACKSWAP_FAIL(errc::transport, "rank " << rank() << ": " << fault_.message);
    case fault_kind::short_data:
      first_nonempty(req.recvs_)->received -= 1;
      break;
    case fault_kind::corrupt_data: {
      recv_op* r = first_nonempty(req.recvs_);
      static_cast<unsigned char*>(r->data)[r->bytes / 2] ^= 0x5a;
      break;
    }
    case fault_kind::alter_metadata: {
      // Change the first payload byte of another rank's block (past its header): the metadata
      // this rank plans with now differs from everyone else's.
      const auto other = static_cast<std::size_t>((rank() + 1) % size());
      const std::size_t at = other * req.block_ + std::min<std::size_t>(req.block_ - 1, 40);
      if (at < req.gathered_.size()) {
        req.gathered_[at] ^= std::byte{0x01};
      }
      break;
    }
    default:
      break;
    }
    return true;
  }

  void cancel(request& req) noexcept {
    if (!req.hung_) {
      inner_->cancel(req.inner_);
    }
  }

  void abort(errc code, const std::string& message) noexcept {
    aborted_ = true;
    inner_->abort(code, message);
  }

  /// `Inner::stray_operations()`, where `Inner` has it.
  template <class I = Inner>
  [[nodiscard]] auto stray_operations() const noexcept
      -> decltype(std::declval<const I&>().stray_operations()) {
    return inner_->stray_operations();
  }

  [[nodiscard]] void* allocate(std::size_t bytes) { return inner_->allocate(bytes); }
  void deallocate(void* p, std::size_t bytes) noexcept { inner_->deallocate(p, bytes); }
  void record(fence& f, stream_type s) { inner_->record(f, s); }
  void mark(fence& f) { inner_->mark(f); }
  void wait_fence(fence& f, stream_type s) { inner_->wait_fence(f, s); }
  void start_after(fence& f) { inner_->start_after(f); }
  /// @}

 private:
  static recv_op* first_nonempty(span<recv_op> recvs) noexcept {
    for (auto& r : recvs) {
      if (r.bytes > 0) {
        return &r;
      }
    }
    return nullptr;
  }

  void pause(prng& rng) const {
    if (jitter_.max.count() > 0 && rng.chance(static_cast<std::uint64_t>(jitter_.percent), 100)) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng.uniform(0, jitter_.max.count())));
    }
  }

  // Decides whether this operation carries the fault. A data fault whose operation has nothing to
  // damage moves on to the next one.
  void arm(request& req, fault_target target, std::int64_t index, bool eligible) {
    req.fault_ = fault_kind::none;
    req.hung_ = false;
    if (fault_.kind == fault_kind::hang && fired_.load()) {
      req.hung_ = true; // a hung peer stays hung
      return;
    }
    if (fault_.kind == fault_kind::none || target != fault_.target || fired_.load() ||
        index < fault_.at || !eligible) {
      return;
    }
    fired_ = true;
    req.fault_ = fault_.kind;
    req.hung_ = fault_.kind == fault_kind::hang;
  }

  Inner* inner_;
  fault fault_;
  jitter jitter_;
  prng start_rng_;             // starting thread only
  prng wait_rng_;              // waiting thread only
  std::int64_t gathers_ = 0;   // starting thread only
  std::int64_t exchanges_ = 0; // starting thread only
  std::atomic<bool> fired_{false};
  std::atomic<bool> aborted_{false};
};

} // namespace packswap
