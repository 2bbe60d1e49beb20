// A minimal data-parallel trainer on the exchange engine: dp ranks are threads (the threads
// backend), each trains a linear regression over ga micro-steps per optimizer step; the engine
// moves whole packs between ranks so that every rank gets the same load. Runs in CI.
#include <packswap/detail/prng.hpp>
#include <packswap/exchange/engine.hpp>
#include <packswap/exchange/threads.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr int dims = 3;
constexpr int steps = 10;
const packswap::shape shape{/*dp=*/4, /*ga=*/4, /*mbs=*/2};

// Rank r's packs of step k: each holds some samples (x[dims], y), and its cost is its sample
// count. Rank 0's loader happens to read the long packs.
std::vector<std::vector<double>> load(int k, int r) {
  packswap::prng rng(static_cast<std::uint64_t>(k * 100 + r));
  std::vector<std::vector<double>> packs(static_cast<std::size_t>(shape.packs_per_rank()));
  for (auto& p : packs) {
    const auto n = r == 0 ? rng.uniform(40, 60) : rng.uniform(0, 20);
    for (std::int64_t i = 0; i < n; ++i) {
      const double x[dims] = {rng.uniform(-100, 100) / 100.0, rng.uniform(-100, 100) / 100.0,
                              rng.uniform(-100, 100) / 100.0};
      p.insert(p.end(), x, x + dims);
      p.push_back(1.5 * x[0] - 2.0 * x[1] + 0.5 * x[2]);
    }
  }
  return packs;
}

// The "all-reduce" of the example: every rank posts its partial sums, waits for the others, and
// adds all of them up in rank order (so every rank gets bit-identical totals).
class all_reduce {
 public:
  std::vector<double> operator()(int rank, const std::vector<double>& mine) {
    std::unique_lock<std::mutex> lock(m_);
    parts_[static_cast<std::size_t>(rank)] = mine;
    arrive(lock);
    std::vector<double> total(mine.size(), 0.0);
    for (const auto& part : parts_) {
      for (std::size_t j = 0; j < total.size(); ++j) {
        total[j] += part[j];
      }
    }
    arrive(lock); // nobody posts the next step's sums before everyone has read these
    return total;
  }

 private:
  void arrive(std::unique_lock<std::mutex>& lock) {
    const long gen = generation_;
    if (++arrived_ == shape.dp) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != gen; });
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::vector<double>> parts_ = std::vector<std::vector<double>>(shape.dp);
  int arrived_ = 0;
  long generation_ = 0;
};

// A without packswap: every rank computes its own packs in loader order.
std::int64_t local_a(int k) {
  std::int64_t a = 0;
  for (std::int32_t m = 0; m < shape.ga; ++m) {
    std::int64_t slowest = 0;
    for (int r = 0; r < shape.dp; ++r) {
      const auto packs = load(k, r);
      std::int64_t load_rm = 0;
      for (std::int32_t i = m * shape.mbs; i < (m + 1) * shape.mbs; ++i) {
        load_rm +=
            static_cast<std::int64_t>(packs[static_cast<std::size_t>(i)].size() / (dims + 1));
      }
      slowest = std::max(slowest, load_rm);
    }
    a += slowest;
  }
  return a;
}

} // namespace

int main() {
  packswap::threads::world world(shape.dp);
  all_reduce reduce;
  std::vector<double> losses(steps);
  std::int64_t moved = 0;
  std::int64_t a_local = 0;
  std::int64_t a_balanced = 0;
  std::vector<std::thread> ranks;
  for (int r = 0; r < shape.dp; ++r) {
    ranks.emplace_back([&, r] {
      packswap::threads::transport transport(world, r);
      packswap::engine<packswap::threads::transport> engine(transport, shape);
      std::vector<std::vector<std::vector<double>>> data;
      for (int k = 0; k < steps; ++k) {
        data.push_back(load(k, r));
      }
      const auto submit = [&](int k) {
        std::vector<packswap::local_pack> packs;
        for (const auto& p : data[static_cast<std::size_t>(k)]) {
          packs.push_back({static_cast<std::int64_t>(p.size() / (dims + 1)),
                           static_cast<std::int64_t>(p.size() * sizeof(double)), p.data()});
        }
        engine.submit(packs);
      };
      std::vector<double> w(dims, 0.0);
      submit(0);
      for (int k = 0; k < steps; ++k) {
        if (k + 1 < steps) {
          submit(k + 1); // early: its metadata gather and solve overlap this step
        }
        std::vector<double> grad(dims + 2, 0.0); // gradient, samples, loss
        for (std::int32_t m = 0; m < shape.ga; ++m) {
          const packswap::micro_batch cell = engine.acquire(m);
          for (const packswap::pack_view& p : cell.packs) {
            std::vector<double> v(static_cast<std::size_t>(p.bytes) / sizeof(double));
            if (p.bytes > 0) {
              std::memcpy(v.data(), p.data, static_cast<std::size_t>(p.bytes));
            }
            for (std::size_t i = 0; i + dims < v.size(); i += dims + 1) {
              double err = -v[i + dims];
              for (int j = 0; j < dims; ++j) {
                err += w[static_cast<std::size_t>(j)] * v[i + static_cast<std::size_t>(j)];
              }
              grad[dims + 1] += err * err;
              for (int j = 0; j < dims; ++j) {
                grad[static_cast<std::size_t>(j)] += 2 * err * v[i + static_cast<std::size_t>(j)];
              }
              grad[dims] += 1;
            }
          }
          engine.release(m);
          if (r == 0 && m == 0) {
            a_balanced += cell.solution->balance.a;
            a_local += local_a(k);
            moved += cell.solution->movement.moved;
          }
        }
        const auto total = reduce(r, grad);
        for (int j = 0; j < dims; ++j) {
          w[static_cast<std::size_t>(j)] -= 0.1 * total[static_cast<std::size_t>(j)] / total[dims];
        }
        if (r == 0) {
          losses[static_cast<std::size_t>(k)] = total[dims + 1] / total[dims];
        }
      }
    });
  }
  for (auto& t : ranks) {
    t.join();
  }
  for (int k = 0; k < steps; ++k) {
    std::printf("step %2d  loss %.6f\n", k, losses[static_cast<std::size_t>(k)]);
  }
  std::printf("over %d steps: %lld packs moved between ranks; summed step time A %lld with "
              "packswap, %lld with every rank computing its own packs\n",
              steps, static_cast<long long>(moved), static_cast<long long>(a_balanced),
              static_cast<long long>(a_local));
  return losses.back() < 0.5 * losses.front() && a_balanced < a_local ? 0 : 1;
}
