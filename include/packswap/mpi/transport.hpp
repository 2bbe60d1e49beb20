#pragma once

#include "packswap/error.hpp"
#include "packswap/exchange/detail/gather.hpp"
#include "packswap/exchange/detail/wire.hpp"
#include "packswap/exchange/transport.hpp"
#include "packswap/span.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace packswap::mpi {

/// The MPI backend: ranks are MPI processes, buffers are host memory. This is how CI runs the
/// real multi-process protocol (`mpirun -np N`).
///
/// ```
/// int provided = 0;
/// MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
/// {
///   packswap::mpi::transport t(MPI_COMM_WORLD);         // duplicates the communicator
///   packswap::engine<packswap::mpi::transport> e(t, {world_size, ga});
///   ...
/// }                                                     // before MPI_Finalize
/// MPI_Finalize();
/// ```
///
/// It owns a duplicate of the communicator it is given, so exchange traffic never matches the
/// caller's own messages. It needs `MPI_THREAD_MULTIPLE`: the engine's caller thread starts
/// operations while its worker waits. Operations are nonblocking point-to-point messages (an
/// all-gather too, so that every pending receive can be cancelled); payloads over 1 GiB go in
/// 1 GiB pieces.
///
/// Stopping, and who still reads your buffers. MPI cannot take back a send: `MPI_Cancel` of a
/// send is deprecated since MPI 4.0, and Open MPI ignores it (a send it could not deliver stays
/// posted until a matching receive takes it). So this transport never abandons a send; it gets
/// every one completed:
///  - `abort` (and the first abort notice another rank sees) stops this rank from starting
///    anything more, tells every other rank (a notice with the code and message), and sends each
///    a goodbye marker behind everything it ever sent there. It then drains: receives and drops
///    every message addressed to it that no receive of its own takes, until a goodbye came from
///    every other rank. MPI delivers the messages of one sender to one receiver in order, so a
///    goodbye means that sender's earlier messages are all taken: its sends completed.
///  - `cancel` of a request that has not completed aborts first (`errc::cancelled`): the other
///    ranks cannot go on without it anyway, and they must drain what it sent. It then cancels the
///    request's receives (`MPI_Cancel` of a receive is reliable: it is cancelled or completes) and
///    waits until every one of its operations completed.
/// So once `cancel` returns, MPI no longer touches the request's buffers, and once every other
/// rank has noticed the abort, no rank reads this rank's memory. Ranks notice it in their next
/// wait (the engine's worker waits whenever it has work) or their next start. Both waits end at
/// `drain_timeout`: a rank that neither notices nor exits (hung, or blocked outside packswap)
/// leaves operations posted. Those are counted by `stray_operations()`; while it is not zero,
/// MPI may still read the sends' payloads and write the receives' buffers, so they must stay
/// allocated (the engine keeps its receive buffers; keep the payloads).
///
/// The communicator is never freed: a rank that aborts later may still send to it, and MPI
/// would hand a freed communicator's context to the next one created, where those messages
/// would match. It goes with `MPI_Finalize`; destroy the transport before that.
///
/// Thread-safety: see `packswap/exchange/transport.hpp`.
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
    // One message to receive: a receive, or a 1 GiB piece of one.
    struct piece_slot {
      request* owner = nullptr;
      std::size_t recv = 0; // index of its recv_op
      int peer = 0;
      int tag = 0;
      char* data = nullptr;
      int count = 0;
      bool matched = false;
      std::unique_ptr<char[]> oversize; // a longer message than expected lands here
    };
    std::vector<MPI_Request> handles_; // sends, then the matched receives
    std::vector<piece_slot> pieces_;
    std::size_t unmatched_ = 0;
    span<recv_op> recvs_;
    bool active_ = false;
    std::vector<send_op> gather_sends_;
    std::vector<recv_op> gather_recvs_;
    bool gather_ = false;
  };

  /// Duplicates `parent`. `drain_timeout` bounds how long stopping waits for the other ranks
  /// (see above). Throws `errc::invalid_argument` unless MPI was initialized with
  /// `MPI_THREAD_MULTIPLE`, `errc::transport` when MPI fails.
  explicit transport(MPI_Comm parent,
                     std::chrono::milliseconds drain_timeout = std::chrono::minutes(1))
      : drain_timeout_(drain_timeout) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    PACKSWAP_EXPECTS(initialized != 0, errc::invalid_argument,
                     "mpi::transport needs MPI to be initialized (MPI_Init_thread)");
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    PACKSWAP_EXPECTS(
        level == MPI_THREAD_MULTIPLE, errc::invalid_argument,
        "mpi::transport needs MPI_THREAD_MULTIPLE (the engine's worker waits while its "
        "caller starts operations), MPI provides thread level "
            << level);
    PACKSWAP_EXPECTS(drain_timeout.count() >= 0, errc::invalid_argument,
                     "drain_timeout is " << drain_timeout.count() << " ms, must be >= 0");
    check(MPI_Comm_dup(parent, &comm_), "MPI_Comm_dup");
    // Errors come back as codes and become packswap errors, instead of killing the job.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    goodbye_from_.assign(static_cast<std::size_t>(size_), false);
    waiting_.resize(2 * static_cast<std::size_t>(size_));
  }

  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;

  /// Says goodbye to the other ranks (unless it did), so that one that aborts later does not
  /// wait for this one, and waits briefly for its own notices to leave. Never throws.
  ~transport() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized != 0) {
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      say_goodbye_locked();
    }
    // Notices and goodbyes are small (eager) and complete at once; one still posted after a
    // while keeps its buffer, which is then left allocated rather than freed under MPI.
    finish_control(exchange_clock::now() + std::chrono::milliseconds(200));
  }

  /// This rank.
  [[nodiscard]] std::int32_t rank() const noexcept { return rank_; }
  /// The number of ranks.
  [[nodiscard]] std::int32_t size() const noexcept { return size_; }

  /// Operations whose completion could not be seen within `drain_timeout` when they were
  /// cancelled: while not zero, MPI may still use their buffers.
  [[nodiscard]] std::int64_t stray_operations() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<std::int64_t>(strays_.size());
  }

  /// Starts gathering `mine` from every rank into `all` (rank r's block at `r * mine.size()`).
  void start_all_gather(request& req, span<const std::byte> mine, span<std::byte> all) {
    detail::gather_as_p2p(rank_, size_, mine, all, req.gather_sends_, req.gather_recvs_);
    start(req, req.gather_sends_, req.gather_recvs_, gather_tag);
    req.gather_ = true;
  }

  /// Starts a group of sends and receives.
  void start_exchange(request& req, span<const send_op> sends, span<recv_op> recvs) {
    start(req, sends, recvs, data_tag);
    req.gather_ = false;
  }

  /// Polls `req` (and abort notices) until it completes or the deadline passes.
  [[nodiscard]] bool wait(request& req, deadline until) {
    detail::backoff pause;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        poll_notices_locked();
        throw_if_aborted_locked();
        if (!req.active_) {
          return true;
        }
        match_locked();
        if (req.unmatched_ == 0) {
          int done = 0;
          const int rc = MPI_Testall(static_cast<int>(req.handles_.size()), req.handles_.data(),
                                     &done, MPI_STATUSES_IGNORE);
          if (rc != MPI_SUCCESS) {
            fail_from_statuses(rc);
          }
          if (done != 0) {
            finish(req);
            return true;
          }
        }
      }
      if (exchange_clock::now() >= until) {
        return false;
      }
      pause.pause();
    }
  }

  /// Withdraws `req`; returns once MPI no longer touches its buffers (or at `drain_timeout`,
  /// leaving `stray_operations()`). A request that has not completed aborts this rank first
  /// (`errc::cancelled`): its sends can only complete once the other ranks drain them.
  void cancel(request& req) noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!req.active_) {
        return;
      }
      const bool all_matched = req.unmatched_ == 0;
      forget_unmatched_locked(req);
      if (all_matched && test_all_locked(req)) {
        req.active_ = false;
        return;
      }
    }
    abort(errc::cancelled, "rank " + std::to_string(rank_) + " stopped with an exchange in flight");
    detail::backoff pause;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        const bool done = test_all_locked(req);
        if (!done && exchange_clock::now() < give_up_at_) {
          drain_once_locked(); // a rank that drains makes progress for the others too
        } else {
          for (auto& h : req.handles_) {
            if (h != MPI_REQUEST_NULL) {
              strays_.push_back(h); // never freed: MPI may still use its buffer
              h = MPI_REQUEST_NULL;
            }
          }
          break;
        }
      }
      pause.pause();
    }
    req.active_ = false;
  }

  /// Stops this rank: every later operation here fails with `code` and `message`, every other
  /// rank gets a notice and fails the same way in its next wait or start, and this returns once
  /// every other rank said goodbye (their sends here are all taken) or at `drain_timeout`.
  void abort(errc code, const std::string& message) noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_locked(rank_, code, message);
      if (draining_ || drained_) {
        return; // another thread drains
      }
      draining_ = true;
    }
    detail::backoff pause;
    for (;;) {
      bool took = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (all_goodbyes_locked() || exchange_clock::now() >= give_up_at_) {
          draining_ = false;
          drained_ = all_goodbyes_locked();
          return;
        }
        took = drain_once_locked();
      }
      if (!took) {
        pause.pause();
      }
    }
  }

 private:
  static constexpr int data_tag = 1;
  static constexpr int gather_tag = 2;
  static constexpr int abort_tag = 3;
  static constexpr int goodbye_tag = 4;
  static constexpr std::int64_t piece = std::int64_t{1} << 30;

  void check(int rc, const char* what) const {
    if (rc != MPI_SUCCESS) {
      PACKSWAP_FAIL(errc::transport,
                    "rank " << rank_ << ": " << what << " failed: " << error_string(rc));
    }
  }

  static std::string error_string(int rc) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return std::string(text, static_cast<std::size_t>(len));
  }

  static std::int64_t pieces(std::int64_t bytes) {
    return bytes <= 0 ? 1 : (bytes + piece - 1) / piece;
  }

  // Posts under mutex_, so that nothing is posted after this rank's goodbye: a goodbye must be
  // the last message this rank sends to each other rank.
  // Posts the sends and queues the receives, under mutex_ so that nothing is posted after this
  // rank's goodbye (a goodbye must be the last message this rank sends to each other rank).
  // Receives are matched later, in start order per peer, by a matched probe (match_locked):
  // knowing a message's length before receiving it, a longer one than planned (ranks that
  // disagree on the plan) lands in a buffer of its own instead of past the end of the planned
  // one, which Open MPI 4.1's single-copy path would write for a truncated receive.
  void start(request& req, span<const send_op> sends, span<recv_op> recvs, int tag) {
    PACKSWAP_EXPECTS(!req.active_, errc::internal,
                     "rank " << rank_ << ": an mpi::transport request was started twice");
    for (const auto& r : recvs) {
      check_peer(r.peer);
    }
    for (const auto& s : sends) {
      check_peer(s.peer);
    }
    req.handles_.clear();
    req.pieces_.clear();
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      auto& r = recvs[i];
      r.received = 0;
      auto* base = static_cast<char*>(r.data);
      for (std::int64_t p = 0; p < pieces(r.bytes); ++p) {
        request::piece_slot slot;
        slot.owner = &req;
        slot.recv = i;
        slot.peer = r.peer;
        slot.tag = tag;
        slot.data = base == nullptr ? nullptr : base + p * piece;
        slot.count =
            static_cast<int>(std::max<std::int64_t>(std::min(piece, r.bytes - p * piece), 0));
        req.pieces_.push_back(std::move(slot));
      }
    }
    req.recvs_ = recvs;
    std::unique_lock<std::mutex> lock(mutex_);
    poll_notices_locked(); // a rank told to stop takes no message that a stale send could match
    throw_if_aborted_locked();
    req.active_ = true;
    req.unmatched_ = req.pieces_.size();
    try {
      for (auto& slot : req.pieces_) {
        waiting_[channel(slot.tag, slot.peer)].push_back(&slot);
      }
      for (const auto& s : sends) {
        const auto* base = static_cast<const char*>(s.data);
        for (std::int64_t p = 0; p < pieces(s.bytes); ++p) {
          const auto n = static_cast<int>(std::min(piece, s.bytes - p * piece));
          req.handles_.push_back(MPI_REQUEST_NULL);
          check(MPI_Isend(base == nullptr ? nullptr : base + p * piece, std::max(n, 0), MPI_BYTE,
                          s.peer, tag, comm_, &req.handles_.back()),
                "MPI_Isend");
        }
      }
    } catch (...) {
      lock.unlock();
      cancel(req); // a start that fails leaves nothing posted
      throw;
    }
  }

  std::size_t channel(int tag, int peer) const {
    return static_cast<std::size_t>(tag == gather_tag) * static_cast<std::size_t>(size_) +
           static_cast<std::size_t>(peer);
  }

  // Under mutex_: matches every queued receive whose message has arrived, oldest first per peer
  // and tag (the matching rule), and starts receiving it.
  void match_locked() {
    for (auto& queue : waiting_) {
      while (!queue.empty()) {
        request::piece_slot& slot = *queue.front();
        int found = 0;
        MPI_Message msg = MPI_MESSAGE_NULL;
        MPI_Status status;
        check(MPI_Improbe(slot.peer, slot.tag, comm_, &found, &msg, &status), "MPI_Improbe");
        if (found == 0) {
          break;
        }
        int n = 0;
        MPI_Get_count(&status, MPI_BYTE, &n);
        char* into = slot.data;
        if (n > slot.count) {
          slot.oversize.reset(new char[static_cast<std::size_t>(n)]);
          into = slot.oversize.get();
        }
        request* req = slot.owner;
        req->handles_.push_back(MPI_REQUEST_NULL);
        check(MPI_Imrecv(into, n, MPI_BYTE, &msg, &req->handles_.back()), "MPI_Imrecv");
        req->recvs_[slot.recv].received += n;
        slot.matched = true;
        --req->unmatched_;
        queue.pop_front();
      }
    }
  }

  void check_peer(std::int32_t peer) const {
    PACKSWAP_EXPECTS(peer >= 0 && peer < size_, errc::invalid_argument,
                     "rank " << rank_ << ": peer " << peer << " is outside a communicator of "
                             << size_ << " ranks");
  }

  void finish(request& req) {
    req.active_ = false;
    if (req.gather_) {
      detail::check_gathered(req.gather_recvs_, rank_);
    }
  }

  [[noreturn]] void fail_from_statuses(int rc) {
    PACKSWAP_FAIL(errc::transport,
                  "rank " << rank_ << ": MPI_Testall failed: " << error_string(rc));
  }

  void throw_if_aborted_locked() const {
    if (aborted_) {
      PACKSWAP_FAIL(abort_code_,
                    "rank " << abort_rank_ << " aborted the exchange: " << abort_message_);
    }
  }

  // Under mutex_. The first stop wins: it records who stopped and why, sends the notices when
  // this rank is the one that stopped, and says goodbye.
  void stop_locked(int who, errc code, const std::string& message) noexcept {
    if (aborted_) {
      return;
    }
    aborted_ = true;
    abort_rank_ = who;
    abort_code_ = code;
    give_up_at_ = exchange_clock::now() + drain_timeout_;
    try {
      abort_message_ = message;
      if (who == rank_) {
        notice_.resize(8 + message.size());
        detail::put_u64(notice_.data(), static_cast<std::uint64_t>(code));
        std::copy(message.begin(), message.end(), reinterpret_cast<char*>(notice_.data() + 8));
        for (int r = 0; r < size_; ++r) {
          if (r != rank_) {
            control_.push_back(MPI_REQUEST_NULL);
            MPI_Isend(notice_.data(), static_cast<int>(notice_.size()), MPI_BYTE, r, abort_tag,
                      comm_, &control_.back());
          }
        }
      }
    } catch (...) {
      // Out of memory: no notice goes out; the others see their deadline pass.
    }
    say_goodbye_locked();
  }

  // Under mutex_: the last message this rank sends to each other rank.
  void say_goodbye_locked() noexcept {
    if (said_goodbye_) {
      return;
    }
    said_goodbye_ = true;
    try {
      for (int r = 0; r < size_; ++r) {
        if (r != rank_) {
          control_.push_back(MPI_REQUEST_NULL);
          MPI_Isend(nullptr, 0, MPI_BYTE, r, goodbye_tag, comm_, &control_.back());
        }
      }
    } catch (...) {
      // Out of memory: the others wait for this goodbye until their drain_timeout.
    }
  }

  // Waits until the notices and goodbyes left, or `until`. Notices still posted then keep their
  // buffer: it is leaked rather than freed under MPI.
  void finish_control(deadline until) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    int done = 0;
    for (;;) {
      MPI_Testall(static_cast<int>(control_.size()), control_.data(), &done, MPI_STATUSES_IGNORE);
      if (done != 0 || exchange_clock::now() >= until) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (done == 0) {
      (void)new std::vector<std::byte>(std::move(notice_)); // leaked on purpose: MPI may read it
    }
  }

  // Under mutex_: the receives of `req` that matched no message yet leave the queues (their
  // messages, if they come, are drained).
  void forget_unmatched_locked(request& req) noexcept {
    for (auto& slot : req.pieces_) {
      if (!slot.matched) {
        auto& queue = waiting_[channel(slot.tag, slot.peer)];
        queue.erase(std::remove(queue.begin(), queue.end(), &slot), queue.end());
      }
    }
    req.unmatched_ = 0;
  }

  // Under mutex_: true once every started operation of `req` completed (handles then are null).
  static bool test_all_locked(request& req) noexcept {
    int done = 0;
    MPI_Testall(static_cast<int>(req.handles_.size()), req.handles_.data(), &done,
                MPI_STATUSES_IGNORE);
    return done != 0;
  }

  bool all_goodbyes_locked() const {
    return std::count(goodbye_from_.begin(), goodbye_from_.end(), true) == size_ - 1;
  }

  // Under mutex_: takes one message addressed here that no receive of this rank takes (dropping
  // it); false when none is waiting.
  bool drain_once_locked() noexcept {
    int found = 0;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &found, &msg, &status) != MPI_SUCCESS ||
        found == 0) {
      return false;
    }
    int n = 0;
    MPI_Get_count(&status, MPI_BYTE, &n);
    std::vector<std::byte> text;
    try {
      text.resize(static_cast<std::size_t>(std::max(n, 8)));
    } catch (...) {
      // Out of memory: take the message without its bytes (it is dropped anyway).
      MPI_Mrecv(nullptr, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
      return true;
    }
    MPI_Mrecv(text.data(), n, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    if (status.MPI_TAG == abort_tag) {
      take_notice_locked(status.MPI_SOURCE, text.data(), n);
    } else if (status.MPI_TAG == goodbye_tag) {
      goodbye_from_[static_cast<std::size_t>(status.MPI_SOURCE)] = true;
    }
    return true;
  }

  // Under mutex_: takes the notice of a rank that aborted, when one is waiting.
  void poll_notices_locked() {
    int found = 0;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status status;
    MPI_Improbe(MPI_ANY_SOURCE, abort_tag, comm_, &found, &msg, &status);
    if (found == 0) {
      return;
    }
    int n = 0;
    MPI_Get_count(&status, MPI_BYTE, &n);
    std::vector<std::byte> text(static_cast<std::size_t>(std::max(n, 8)));
    MPI_Mrecv(text.data(), n, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    take_notice_locked(status.MPI_SOURCE, text.data(), n);
  }

  // Under mutex_: the notice of `source`, `n` bytes at `text` (at least 8 readable).
  void take_notice_locked(int source, const std::byte* text, int n) noexcept {
    const auto code = detail::get_u64(text);
    const errc c = code >= 1 && code <= static_cast<std::uint64_t>(errc::internal)
                       ? static_cast<errc>(code)
                       : errc::transport;
    try {
      stop_locked(source, c,
                  std::string(reinterpret_cast<const char*>(text + 8),
                              static_cast<std::size_t>(std::max(n - 8, 0))));
    } catch (...) {
      stop_locked(source, c, std::string());
    }
  }

  std::chrono::milliseconds drain_timeout_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  // Guards the state below and every MPI call: with calls from two threads at once (the worker
  // cancelling while the caller drains), Open MPI 4.1 was seen to write a message into a
  // cancelled receive's buffer after the cancel completed.
  mutable std::mutex mutex_;
  bool aborted_ = false;
  int abort_rank_ = -1;
  errc abort_code_ = errc::transport;
  std::string abort_message_;
  bool said_goodbye_ = false;
  std::vector<bool> goodbye_from_;
  bool draining_ = false;
  bool drained_ = false;
  std::vector<std::byte> notice_;
  std::vector<MPI_Request> control_; // notices and goodbyes sent
  std::vector<MPI_Request> strays_;
  // Receives waiting for their message, in start order, per tag and peer (see `channel`).
  std::vector<std::deque<request::piece_slot*>> waiting_;
  deadline give_up_at_{}; // when stopping stops waiting for the other ranks
};

} // namespace packswap::mpi
