#pragma once

// The solve worker behind packswap.torch.Rebalancer: one owned thread that runs
// packswap::solver on the batches handed to it, in order, while the caller's thread (which holds
// Python's GIL at other times) keeps issuing collectives. Pure C++: no Python, no CUDA.

#include <packswap/error.hpp>
#include <packswap/solve.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace packswap::python {

/// One solved global batch as the Python module hands it out: the solution and what it was
/// solved for. Immutable once made, so it can be shared between threads.
struct solved_batch {
  packswap::solution sol;
  packswap::shape shape;
  std::int32_t plan_rank = -1; ///< whose lists `sol.plan` holds (-1: every rank)
  bool count_peers = true;     ///< whether `sol.movement` counted peers
  double solve_us = 0.0;       ///< wall time of the solve itself
};

/// Solves `packs` with `solver` into a new `solved_batch`, timing the solve.
inline std::shared_ptr<solved_batch> solve_batch(packswap::solver& solver,
                                                 const std::vector<pack_meta>& packs,
                                                 const shape& s, const solve_options& opt) {
  auto out = std::make_shared<solved_batch>();
  const auto t0 = std::chrono::steady_clock::now();
  solver.solve(packs, s, opt, out->sol);
  out->solve_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  out->shape = s;
  out->plan_rank = opt.plan_rank;
  out->count_peers = opt.count_peers;
  return out;
}

/// A persistent thread that solves batches in submission order.
///
/// `submit` queues a batch and returns its ticket; `take` waits (up to a timeout) for that
/// ticket's solution or rethrows the solve's exception. `close` (and the destructor) stops the
/// thread after the batch it is solving and joins it; queued batches are dropped and a `take`
/// blocked on them returns a `cancelled` error. Every member may be called from any thread; the
/// worker itself never calls back into its owner.
class solve_worker {
 public:
  /// The most batches queued or solved and not yet taken; one more is an error.
  static constexpr std::size_t max_pending = 64;

  solve_worker() : thread_([this] { run(); }) {}
  solve_worker(const solve_worker&) = delete;
  solve_worker& operator=(const solve_worker&) = delete;
  ~solve_worker() { close(); }

  /// Queues one batch; the solver validates it on the worker (a bad batch comes back from
  /// `take` as the solver's exception). Throws `errc::cancelled` once closed and
  /// `errc::invalid_argument` when `max_pending` batches are already waiting to be taken.
  std::uint64_t submit(std::vector<pack_meta> packs, const shape& s, const solve_options& opt) {
    std::unique_lock<std::mutex> lock(mutex_);
    PACKSWAP_EXPECTS(!stop_, errc::cancelled, "the solve worker was closed");
    PACKSWAP_EXPECTS(live_.size() < max_pending, errc::invalid_argument,
                     "the solve worker holds " << max_pending << " batches not yet taken");
    const std::uint64_t ticket = next_++;
    live_.insert(ticket);
    queue_.push_back(job{ticket, std::move(packs), s, opt});
    lock.unlock();
    work_cv_.notify_one();
    return ticket;
  }

  /// Waits up to `timeout` for batch `ticket`. Returns its solution and forgets it, or null when
  /// the time ran out (the batch stays queued and may be taken later). Rethrows the exception
  /// of a solve that failed; throws `errc::cancelled` when the worker was closed before solving
  /// it and `errc::invalid_argument` for a ticket never issued or already taken.
  std::shared_ptr<solved_batch> take(std::uint64_t ticket, std::chrono::nanoseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    PACKSWAP_EXPECTS(live_.count(ticket) != 0, errc::invalid_argument,
                     "solve ticket " << ticket << " was never issued or was already taken");
    const auto ready = [&] {
      return done_.count(ticket) != 0 || (stop_ && !(busy_ && current_ == ticket));
    };
    if (!done_cv_.wait_for(lock, timeout, ready)) {
      return nullptr;
    }
    live_.erase(ticket);
    const auto it = done_.find(ticket);
    PACKSWAP_EXPECTS(it != done_.end(), errc::cancelled,
                     "the solve worker was closed before it solved batch " << ticket);
    outcome o = std::move(it->second);
    done_.erase(it);
    if (o.error) {
      std::rethrow_exception(o.error);
    }
    return std::move(o.value);
  }

  /// Stops the worker after its current solve and joins it. Idempotent; never throws.
  void close() noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!stop_) {
        stop_ = true;
        queue_.clear();
      }
    }
    work_cv_.notify_all();
    done_cv_.notify_all();
    std::lock_guard<std::mutex> join_lock(join_mutex_);
    if (thread_.joinable()) {
      thread_.join();
    }
  }

  /// Whether `close` was called.
  bool closed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stop_;
  }

  /// Batches queued or being solved.
  std::size_t pending() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.size() + (busy_ ? 1 : 0);
  }

 private:
  struct job {
    std::uint64_t ticket = 0;
    std::vector<pack_meta> packs;
    shape s;
    solve_options opt;
  };
  struct outcome {
    std::shared_ptr<solved_batch> value;
    std::exception_ptr error;
  };

  void run() {
    packswap::solver solver; // kept across batches: its working memory is reused
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) {
        return;
      }
      job j = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      current_ = j.ticket;
      lock.unlock();
      outcome o;
      try {
        o.value = solve_batch(solver, j.packs, j.s, j.opt);
      } catch (...) {
        o.error = std::current_exception();
      }
      j.packs = {}; // freed here, not under the lock
      lock.lock();
      busy_ = false;
      done_.emplace(j.ticket, std::move(o));
      done_cv_.notify_all();
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<job> queue_;
  std::map<std::uint64_t, outcome> done_;
  std::set<std::uint64_t> live_; // issued and not yet taken
  std::uint64_t next_ = 0;
  std::uint64_t current_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  std::mutex join_mutex_; // two threads closing at once: one joins, the other waits for it
  std::thread thread_;    // last: started once every member above exists
};

} // namespace packswap::python
