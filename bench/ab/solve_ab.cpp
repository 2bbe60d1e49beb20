// Paired A/B timing of the solve: loads the shared libraries built by scripts/ab-solve (one per
// revision) and calls them in turn on the same batch, round after round, so that every
// revision sees the same machine state; reports each one's median, 10th percentile, minimum and
// page faults per solve, and the median of the per-round ratios against the first library.
// On a shared machine whose speed drifts by tens of percent within minutes, the paired ratio is
// the figure to trust; separate runs compare the machine with itself.
//
//   solve_ab PACKS ROUNDS REFINE(0|1) BATCH LIB...
//
// BATCH is DIST[:GA[:SEED[:EPS]]]: a workload preset, `synthetic:<mix>` or a stress-set
// distribution (tests/support/stress.hpp), dp = PACKS / GA; default ga 16, seed 42, eps 0.
#include <packswap/batch.hpp>

#include "stress.hpp"
#include "workloads.hpp"

#include <dlfcn.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace {

using solve_fn = std::int64_t (*)(const void*, std::int64_t, std::int32_t, std::int32_t, int,
                                  double);

struct batch_spec {
  std::string dist = "vlm-pretrain";
  std::int64_t ga = 16;
  std::uint64_t seed = 42;
  double eps = 0.0;
};

// DIST[:GA[:SEED[:EPS]]]; false on a malformed field. The distribution's name may itself hold a
// colon (`synthetic:vlm`), so up to three numeric fields are taken off the end.
bool parse_spec(const std::string& text, batch_spec& out) {
  std::string rest = text;
  std::vector<std::string> numbers; // in order
  for (std::size_t colon; numbers.size() < 3 && (colon = rest.rfind(':')) != std::string::npos;
       rest.resize(colon)) {
    const std::string field = rest.substr(colon + 1);
    char* end = nullptr;
    std::strtod(field.c_str(), &end);
    if (field.empty() || *end != '\0') {
      break;
    }
    numbers.insert(numbers.begin(), field);
  }
  out.dist = rest;
  if (!numbers.empty()) {
    out.ga = std::atoll(numbers[0].c_str());
  }
  if (numbers.size() >= 2) {
    out.seed = std::strtoull(numbers[1].c_str(), nullptr, 10);
  }
  if (numbers.size() >= 3) {
    out.eps = std::atof(numbers[2].c_str());
  }
  return out.ga >= 1 && out.eps >= 0.0 && out.eps <= 1.0;
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s PACKS ROUNDS REFINE(0|1) DIST[:GA[:SEED[:EPS]]] LIB...\n",
                 argv[0]);
    return 2;
  }
  const std::int64_t packs = std::atoll(argv[1]);
  const int rounds = std::atoi(argv[2]);
  const int refine = std::atoi(argv[3]);
  batch_spec spec;
  if (!parse_spec(argv[4], spec) || packs < spec.ga || packs % spec.ga != 0 || rounds < 1) {
    std::fprintf(stderr,
                 "PACKS must be a positive multiple of GA, ROUNDS >= 1, EPS in [0, 1]; "
                 "batch '%s'\n",
                 argv[4]);
    return 2;
  }
  const packswap::shape s{static_cast<std::int32_t>(packs / spec.ga),
                          static_cast<std::int32_t>(spec.ga), 1};
  namespace stress = packswap::test::stress;
  std::vector<packswap::pack_meta> batch;
  try {
    stress::dist d{};
    batch = stress::parse(spec.dist, d) ? stress::batch(s, d, spec.seed)
                                        : packswap::bench::named_batch(spec.dist, s, spec.seed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "batch '%s': %s\n", argv[4], e.what());
    return 2;
  }
  std::vector<solve_fn> fns;
  std::vector<std::string> names;
  for (int i = 5; i < argc; ++i) {
    void* lib = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
    fns.push_back(reinterpret_cast<solve_fn>(dlsym(lib, "packswap_ab_solve")));
    if (fns.back() == nullptr) {
      std::fprintf(stderr, "%s: no packswap_ab_solve\n", argv[i]);
      return 1;
    }
    names.emplace_back(argv[i]);
  }
  const auto call = [&](std::size_t k) {
    return fns[k](batch.data(), packs, s.dp, s.ga, refine, spec.eps);
  };
  std::vector<std::int64_t> moved(fns.size());
  for (std::size_t k = 0; k < fns.size(); ++k) {
    moved[k] = call(k); // warm-up, and the answer every revision should agree on
    call(k);
  }
  std::vector<std::vector<double>> ms(fns.size());
  std::vector<long> faults(fns.size(), 0);
  for (int r = 0; r < rounds; ++r) {
    // Forward in even rounds, backward in odd ones: whichever runs second in a round pays for
    // what the first left in the caches (about 5% at 262,144 packs when the same revision runs
    // twice in a fixed order).
    for (std::size_t i = 0; i < fns.size(); ++i) {
      const std::size_t k = r % 2 == 0 ? i : fns.size() - 1 - i;
      const long f0 = minor_faults();
      const auto t0 = std::chrono::steady_clock::now();
      const std::int64_t out = call(k);
      ms[k].push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      faults[k] += minor_faults() - f0;
      if (out != moved[k]) {
        std::fprintf(stderr, "%s: a different answer in round %d\n", names[k].c_str(), r);
        return 1;
      }
    }
  }
  std::printf("%lld packs of %s seed %llu (dp %d, ga %d), eps %g, %s, %d rounds\n",
              static_cast<long long>(packs), spec.dist.c_str(),
              static_cast<unsigned long long>(spec.seed), s.dp, s.ga, spec.eps,
              refine != 0 ? "full solve" : "stage 1 + own plan", rounds);
  for (std::size_t k = 0; k < fns.size(); ++k) {
    std::printf("  %-40s median %9.3f ms  p10 %9.3f  min %9.3f  %6ld faults/solve  moved %lld\n",
                names[k].c_str(), quantile(ms[k], 0.5), quantile(ms[k], 0.1), quantile(ms[k], 0),
                faults[k] / rounds, static_cast<long long>(moved[k]));
  }
  for (std::size_t k = 1; k < fns.size(); ++k) {
    std::vector<double> ratio;
    for (int r = 0; r < rounds; ++r) {
      ratio.push_back(ms[k][static_cast<std::size_t>(r)] / ms[0][static_cast<std::size_t>(r)]);
    }
    std::printf("  %s / %s: median per-round ratio %.3f (quartiles %.3f-%.3f)\n", names[k].c_str(),
                names[0].c_str(), quantile(ratio, 0.5), quantile(ratio, 0.25),
                quantile(ratio, 0.75));
  }
  return 0;
}
