#pragma once

/// The transport concept: what the exchange engine needs from a communication backend.
///
/// A transport is one rank's endpoint of a group of `size()` ranks. It offers two operations,
/// both started without blocking and completed through a `request`:
///  - an all-gather of one fixed-size record block per rank (the per-pack metadata), and
///  - a group of point-to-point sends and receives of byte buffers (the packs).
/// Backends: `threads::transport` (ranks are threads of one process, host memory),
/// `mpi::transport` (processes, host memory; `packswap/mpi/transport.hpp`) and
/// `nccl::transport` (GPUs, device memory, stream-ordered; `packswap/nccl/transport.hpp`).
///
/// Matching rule, the same on every backend: between two ranks, the n-th send one rank starts to
/// the other matches the n-th receive the other starts from it. The engine starts operations in
/// the same order on every rank, so both ends of every link agree.
///
/// Thread-safety contract every backend keeps: one thread starts operations (`start_*`, the
/// stream hooks, `allocate`/`deallocate`), another waits for them (`wait`); `cancel` and `abort`
/// may come from either, on different requests at once. A request belongs to one operation at a
/// time and must stay at the same address until it completed or was cancelled.

#include "packswap/error.hpp"
#include "packswap/span.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

namespace packswap {

/// The clock of every exchange deadline.
using exchange_clock = std::chrono::steady_clock;

/// A point in time after which a wait gives up.
using deadline = exchange_clock::time_point;

/// Where a transport's buffers live.
enum class memory_space {
  host,   ///< ordinary host memory: the engine may read payloads (checksums)
  device, ///< GPU memory: payloads are only touched by stream-ordered GPU work
};

/// One send of a group: `bytes` bytes at `data` to rank `peer`. `data` stays valid and unchanged
/// until the request completes or is cancelled.
struct send_op {
  std::int32_t peer = 0;      ///< the receiving rank
  const void* data = nullptr; ///< the payload, in the transport's memory
  std::int64_t bytes = 0;     ///< payload size
};

/// One receive of a group: up to `bytes` bytes from rank `peer` into `data`. On completion the
/// transport sets `received` to the byte count the sender sent (which differs from `bytes` only
/// when something is wrong; the engine checks it). The `recv_op` itself must stay at its address
/// until the request completes or is cancelled.
struct recv_op {
  std::int32_t peer = 0;      ///< the sending rank
  void* data = nullptr;       ///< where the payload lands, in the transport's memory
  std::int64_t bytes = 0;     ///< room at `data`
  std::int64_t received = -1; ///< bytes the sender sent, set on completion
};

/// The "stream" of a host transport: none. Host transports complete on the host.
struct host_stream {};

/// The fence of a host transport: nothing to wait for.
struct host_fence {};

namespace detail {

/// What every host-memory transport shares: its types, aligned host buffers, and stream hooks
/// that have nothing to order (host transports complete on the host).
class host_transport_base {
 public:
  using stream_type = host_stream;
  using fence = host_fence;
  static constexpr memory_space memory = memory_space::host;
  static constexpr bool stream_ordered = false;

  /// Host memory, aligned for any payload type (and for the vector loads of checksums).
  [[nodiscard]] void* allocate(std::size_t bytes) {
    return bytes == 0 ? nullptr : ::operator new (bytes, std::align_val_t{alignment});
  }
  void deallocate(void* p, std::size_t) noexcept {
    if (p != nullptr) {
      ::operator delete (p, std::align_val_t{alignment});
    }
  }

  void record(fence&, stream_type) noexcept {}
  void mark(fence&) noexcept {}
  void wait_fence(fence&, stream_type) noexcept {}
  void start_after(fence&) noexcept {}

 private:
  static constexpr std::size_t alignment = 256;
};

/// Sleeps between polls, from 20 us doubling to 1 ms: prompt when an operation completes soon,
/// and no spinning when ranks are oversubscribed (CI runs 8 processes on 2 cores).
class backoff {
 public:
  void pause() {
    std::this_thread::sleep_for(delay_);
    delay_ = std::min(delay_ * 2, std::chrono::microseconds(1000));
  }

 private:
  std::chrono::microseconds delay_{20};
};

} // namespace detail

namespace detail {

template <class...>
using void_t = void;

template <class T>
using request_t = typename T::request;
template <class T>
using stream_t = typename T::stream_type;
template <class T>
using fence_t = typename T::fence;

// Every member the concept needs, as an expression that must compile.
template <class T>
using transport_expressions =
    void_t<request_t<T>, stream_t<T>, fence_t<T>, decltype(T::memory), decltype(T::stream_ordered),
           decltype(std::declval<const T&>().rank()), decltype(std::declval<const T&>().size()),
           decltype(std::declval<T&>().start_all_gather(std::declval<request_t<T>&>(),
                                                        std::declval<span<const std::byte>>(),
                                                        std::declval<span<std::byte>>())),
           decltype(std::declval<T&>().start_exchange(std::declval<request_t<T>&>(),
                                                      std::declval<span<const send_op>>(),
                                                      std::declval<span<recv_op>>())),
           decltype(std::declval<T&>().wait(std::declval<request_t<T>&>(), deadline{})),
           decltype(std::declval<T&>().cancel(std::declval<request_t<T>&>())),
           decltype(std::declval<T&>().abort(errc::transport, std::string())),
           decltype(std::declval<T&>().allocate(std::size_t{})),
           decltype(std::declval<T&>().deallocate(nullptr, std::size_t{})),
           decltype(std::declval<T&>().record(std::declval<fence_t<T>&>(), stream_t<T>{})),
           decltype(std::declval<T&>().mark(std::declval<fence_t<T>&>())),
           decltype(std::declval<T&>().wait_fence(std::declval<fence_t<T>&>(), stream_t<T>{})),
           decltype(std::declval<T&>().start_after(std::declval<fence_t<T>&>()))>;

// The types and guarantees of those members; only instantiated once they all exist.
template <class T>
struct transport_properties {
  using req = request_t<T>;
  static constexpr bool types_ok =
      std::is_default_constructible_v<req> && std::is_default_constructible_v<fence_t<T>> &&
      std::is_convertible_v<decltype(std::declval<const T&>().rank()), std::int32_t> &&
      std::is_convertible_v<decltype(std::declval<const T&>().size()), std::int32_t> &&
      std::is_same_v<decltype(std::declval<T&>().wait(std::declval<req&>(), deadline{})), bool> &&
      std::is_same_v<std::remove_cv_t<decltype(T::memory)>, memory_space>;
  // One noexcept(...) per constant: clang-format 14 misreads `noexcept(...) &&`.
  static constexpr bool cancel_noexcept = noexcept(std::declval<T&>().cancel(std::declval<req&>()));
  static constexpr bool abort_noexcept =
      noexcept(std::declval<T&>().abort(errc::transport, std::string()));
  static constexpr bool deallocate_noexcept =
      noexcept(std::declval<T&>().deallocate(nullptr, std::size_t{}));
  static constexpr bool value =
      types_ok && cancel_noexcept && abort_noexcept && deallocate_noexcept;
};

} // namespace detail

/// Whether `T` models the transport concept (see `is_transport_v` for its members).
template <class T, class = void>
struct is_transport : std::false_type {};

/// `T` provides every member below with the right types and `noexcept`-ness.
template <class T>
struct is_transport<T, detail::transport_expressions<T>>
    : std::bool_constant<detail::transport_properties<T>::value> {};

/// True when `T` models the transport concept. A transport `t` of type `T` provides:
///
/// - `T::request`: a default-constructible completion handle, reused from one operation to the
///   next; `T::memory`: `memory_space::host` or `device`, where `allocate` puts buffers;
///   `T::stream_ordered`: true when completion is ordered on the caller's GPU stream (NCCL);
///   `T::stream_type`, `T::fence`: the caller's stream and a marker on a stream
///   (`host_stream`, `host_fence` for host backends).
/// - `t.rank()`, `t.size()`: this rank and the number of ranks.
/// - `t.start_all_gather(req, mine, all)`: starts gathering every rank's `mine` into `all`,
///   rank r's block at `r * mine.size()` (host spans on every backend).
/// - `t.start_exchange(req, sends, recvs)`: starts a group of sends and receives.
/// - `t.wait(req, deadline)`: true once `req` completed, false at the deadline; throws
///   `packswap::error` when it failed.
/// - `t.cancel(req)`, `noexcept`: withdraws an unfinished request and returns once neither this
///   rank nor any other reads or writes its buffers (the engine relies on this to let the
///   caller free payloads after an error, an abort or its destruction). A backend that cannot
///   withdraw an operation in flight may abort to get there.
/// - `t.abort(code, message)`, `noexcept`: fails every pending and later operation here and, as
///   far as the backend can, on the other ranks.
/// - `t.allocate(n)`, `t.deallocate(p, n)` (`noexcept`): buffers in `T::memory`, stream-ordered
///   on GPU backends.
/// - `t.record(f, s)`, `t.mark(f)`: a fence at the end of the caller's stream `s`, or of the
///   transport's own stream; `t.wait_fence(f, s)`, `t.start_after(f)`: the caller's stream, or
///   later transport work, waits for `f` (no host blocking).
///
/// Optional members: `t.stray_operations()` (operations `cancel` could not stop within the
/// backend's deadline: while not zero their buffers may still be used, and the engine keeps its
/// receive buffers), and the CTA-tuning hooks of `packswap::nccl::transport`.
///
/// Errors are `packswap::error` with `errc::transport` (or `cuda`/`nccl`); an abort seen from
/// another rank keeps that rank's code and message.
template <class T>
inline constexpr bool is_transport_v = is_transport<T>::value;

namespace detail {

// Optional members through which a GPU backend measures compute time and picks its CTA limit
// (see packswap/nccl/transport.hpp); host transports do not have them.
template <class T, class = void>
struct has_tuning : std::false_type {};
template <class T>
struct has_tuning<
    T, void_t<decltype(std::declval<T&>().compute_begin(std::declval<typename T::stream_type>())),
              decltype(std::declval<T&>().compute_end(std::declval<typename T::stream_type>())),
              decltype(std::declval<T&>().compute_ns()),
              decltype(std::declval<T&>().tune(std::int64_t{}, std::int64_t{})),
              decltype(std::declval<const T&>().ctas())>> : std::true_type {};

// Optional member: operations a backend could not stop when they were cancelled (see
// packswap/mpi/transport.hpp). While any remain, their buffers may still be used.
template <class T, class = void>
struct has_strays : std::false_type {};
template <class T>
struct has_strays<T, void_t<decltype(std::declval<const T&>().stray_operations())>>
    : std::true_type {};

} // namespace detail

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// C++20 spelling of `is_transport_v`.
template <class T>
concept transport_like = is_transport_v<T>;
#endif

} // namespace packswap
