// Training equivalence, DESIGN.md's "loss curves identical" as a test: a linear regression in
// double trained over dp ranks x ga micro-steps, once with each rank computing its own packs and
// once with the engine rebalancing them across ranks and micro-steps. A gradient is a sum, so the
// two runs differ only in summation order: summed gradients agree to 1e-12 relative, and so do
// the 20-step loss curves.
#include "support.hpp"

#include <packswap/exchange/threads.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

constexpr int dims = 4;
constexpr int steps = 20;
constexpr double learning_rate = 0.05;
using vec = std::array<double, dims>;

// A pack holds n samples of (x[dims], y) as doubles; n may be 0 (an empty pack).
struct pack_data {
  std::vector<double> values;
  std::int64_t samples = 0;
};

pack_data make_pack(packswap::prng& rng) {
  const vec truth{0.5, -1.25, 2.0, 0.75};
  pack_data p;
  p.samples = rng.chance(1, 6) ? 0 : rng.uniform(1, 40);
  for (std::int64_t i = 0; i < p.samples; ++i) {
    double y = 0.1; // the model has no bias term, so this stays as irreducible loss
    for (int j = 0; j < dims; ++j) {
      const double x = static_cast<double>(rng.uniform(-1000, 1000)) / 1000.0;
      p.values.push_back(x);
      y += truth[static_cast<std::size_t>(j)] * x;
    }
    p.values.push_back(y + static_cast<double>(rng.uniform(-50, 50)) / 1000.0);
  }
  return p;
}

// Adds one pack's squared-error loss and gradient to `loss` and `grad`.
void accumulate(const double* v, std::int64_t samples, const vec& w, double& loss, vec& grad) {
  for (std::int64_t i = 0; i < samples; ++i) {
    const double* x = v + i * (dims + 1);
    double err = -x[dims];
    for (int j = 0; j < dims; ++j) {
      err += w[static_cast<std::size_t>(j)] * x[j];
    }
    loss += err * err;
    for (int j = 0; j < dims; ++j) {
      grad[static_cast<std::size_t>(j)] += 2 * err * x[j];
    }
  }
}

struct result {
  std::vector<double> losses;
  std::vector<vec> grads;
};

// A reusable barrier for the rank threads (std::barrier is C++20).
class barrier {
 public:
  explicit barrier(int n) : n_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(m_);
    const auto gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return gen != gen_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_;
  int count_ = 0;
  long gen_ = 0;
};

double relative(double a, double b) {
  const double scale = std::max(std::abs(a), std::abs(b));
  return scale == 0 ? 0 : std::abs(a - b) / scale;
}

double relative(const vec& a, const vec& b) {
  double diff = 0;
  double norm = 0;
  for (int j = 0; j < dims; ++j) {
    diff += (a[static_cast<std::size_t>(j)] - b[static_cast<std::size_t>(j)]) *
            (a[static_cast<std::size_t>(j)] - b[static_cast<std::size_t>(j)]);
    norm += a[static_cast<std::size_t>(j)] * a[static_cast<std::size_t>(j)];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

} // namespace

TEST_CASE("rebalanced training gives the same gradients and loss curve as local training") {
  const packswap::shape s{4, 4, 2};
  const auto ppr = static_cast<std::size_t>(s.packs_per_rank());
  // data[step][rank][index]; the cost of a pack is its sample count.
  std::vector<std::vector<std::vector<pack_data>>> data(steps);
  packswap::prng rng(2024);
  for (auto& step : data) {
    step.resize(static_cast<std::size_t>(s.dp));
    for (auto& rank : step) {
      for (std::size_t i = 0; i < ppr; ++i) {
        rank.push_back(make_pack(rng));
      }
    }
  }

  // 1. Local: every rank computes its own packs, in loader order.
  result local;
  {
    vec w{};
    double samples = 0;
    for (int k = 0; k < steps; ++k) {
      double loss = 0;
      vec grad{};
      samples = 0;
      for (const auto& rank : data[static_cast<std::size_t>(k)]) {
        double rank_loss = 0;
        vec rank_grad{};
        for (const auto& p : rank) {
          accumulate(p.values.data(), p.samples, w, rank_loss, rank_grad);
          samples += static_cast<double>(p.samples);
        }
        loss += rank_loss;
        for (int j = 0; j < dims; ++j) {
          grad[static_cast<std::size_t>(j)] += rank_grad[static_cast<std::size_t>(j)];
        }
      }
      local.losses.push_back(loss / samples);
      local.grads.push_back(grad);
      for (int j = 0; j < dims; ++j) {
        w[static_cast<std::size_t>(j)] -=
            learning_rate * grad[static_cast<std::size_t>(j)] / samples;
      }
    }
  }

  // 2. Rebalanced: the engine moves packs between ranks and micro-steps; the gradients are summed
  //    over ranks ("all-reduce") in rank order after every step.
  result balanced;
  std::int64_t received = 0;
  {
    packswap::threads::world world(s.dp);
    barrier sync(s.dp);
    std::vector<vec> rank_grads(static_cast<std::size_t>(s.dp));
    std::vector<double> rank_losses(static_cast<std::size_t>(s.dp));
    std::vector<double> rank_samples(static_cast<std::size_t>(s.dp));
    std::mutex stats_mutex;
    packswap::test::rethrow_first(packswap::test::run_ranks(s.dp, [&](std::int32_t r) {
      packswap::threads::transport t(world, r);
      packswap::engine_options opt;
      opt.timeout = std::chrono::seconds(60);
      packswap::engine<packswap::threads::transport> e(t, s, opt);
      const auto submit = [&](int k) {
        std::vector<packswap::local_pack> packs;
        for (const auto& p : data[static_cast<std::size_t>(k)][static_cast<std::size_t>(r)]) {
          packs.push_back({p.samples, static_cast<std::int64_t>(p.values.size() * sizeof(double)),
                           p.values.data()});
        }
        e.submit(packs);
      };
      vec w{};
      submit(0);
      for (int k = 0; k < steps; ++k) {
        if (k + 1 < steps) {
          submit(k + 1);
        }
        double loss = 0;
        double samples = 0;
        vec grad{};
        for (std::int32_t m = 0; m < s.ga; ++m) {
          const auto cell = e.acquire(m);
          for (const auto& p : cell.packs) {
            // Received packs arrive in byte buffers with no alignment promise for double.
            std::vector<double> values(static_cast<std::size_t>(p.bytes) / sizeof(double));
            if (p.bytes > 0) {
              std::memcpy(values.data(), p.data, static_cast<std::size_t>(p.bytes));
            }
            const auto n = static_cast<std::int64_t>(values.size()) / (dims + 1);
            accumulate(values.data(), n, w, loss, grad);
            samples += static_cast<double>(n);
          }
          e.release(m);
        }
        rank_grads[static_cast<std::size_t>(r)] = grad;
        rank_losses[static_cast<std::size_t>(r)] = loss;
        rank_samples[static_cast<std::size_t>(r)] = samples;
        sync.arrive_and_wait();
        vec total{};
        double total_loss = 0;
        double total_samples = 0;
        for (std::int32_t q = 0; q < s.dp; ++q) {
          for (int j = 0; j < dims; ++j) {
            total[static_cast<std::size_t>(j)] +=
                rank_grads[static_cast<std::size_t>(q)][static_cast<std::size_t>(j)];
          }
          total_loss += rank_losses[static_cast<std::size_t>(q)];
          total_samples += rank_samples[static_cast<std::size_t>(q)];
        }
        if (r == 0) {
          balanced.losses.push_back(total_loss / total_samples);
          balanced.grads.push_back(total);
        }
        for (int j = 0; j < dims; ++j) {
          w[static_cast<std::size_t>(j)] -=
              learning_rate * total[static_cast<std::size_t>(j)] / total_samples;
        }
        sync.arrive_and_wait();
      }
      std::lock_guard<std::mutex> lock(stats_mutex);
      received += e.stats().packs_received;
    }));
  }

  REQUIRE(balanced.losses.size() == static_cast<std::size_t>(steps));
  CHECK(received > 0); // the engine really moved packs between ranks
  MESSAGE("packs received from other ranks over " << steps << " steps: " << received << " of "
                                                  << steps * s.packs());
  double worst_grad = 0;
  double worst_loss = 0;
  for (int k = 0; k < steps; ++k) {
    CAPTURE(k);
    const double g = relative(local.grads[static_cast<std::size_t>(k)],
                              balanced.grads[static_cast<std::size_t>(k)]);
    const double l = relative(local.losses[static_cast<std::size_t>(k)],
                              balanced.losses[static_cast<std::size_t>(k)]);
    CHECK(g <= 1e-12);
    CHECK(l <= 1e-12);
    worst_grad = std::max(worst_grad, g);
    worst_loss = std::max(worst_loss, l);
  }
  // The loss goes down: the comparison is of a curve that trains, not of a constant.
  CHECK(local.losses.back() < 0.5 * local.losses.front());
  MESSAGE("largest relative difference over "
          << steps << " steps: gradient " << worst_grad << ", loss " << worst_loss << "; loss "
          << local.losses.front() << " -> " << local.losses.back());
}
