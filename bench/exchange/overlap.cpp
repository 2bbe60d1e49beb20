// Overlap that survives real compute: the exchange of micro-step m+1 next to eight
// bf16 8192^3 cuBLAS GEMMs (~10 ms on an H200) computing micro-step m, at world size 1 with every
// pack crossing NCCL (self-sends), for 256 MiB and 1 GiB per micro-step.
//
// Rows: {bytes} x {NCCL's default CTAs, packswap's choice} x {synchronous, overlapped}, and
// overlapped with fixed limits of 1, 2, 4, 8 and 16 CTAs.
//  - synchronous: exchange, then GEMMs, strictly in turn (the order DESIGN.md §1 found to eat
//    the gain).
//  - overlapped: the engine, prefetching one micro-step ahead.
// Counters, per micro-step: gemm_ms (the same steps of GEMMs with no exchange, measured right
// before the row in the row's own loop shape, so that clock and power state match), exchange_ms
// (the exchange alone), exposed_ms = step time - gemm_ms, exposed_pct = exposed_ms / exchange_ms,
// gemm_slowdown_pct = how much longer the GEMMs took next to the exchange than with no exchange,
// ctas (0: NCCL's default). Medians over the row's iterations.
//
// The GPU's clocks follow its power: bf16 GEMMs this size run power-bound, and they run faster
// after the GPU idled a while. A synchronous row's GEMMs follow an exchange that leaves most SMs
// idle, so they can run faster than back-to-back GEMMs (a negative "slowdown"); the baseline for
// each row is therefore measured in that row's own loop shape, not once at start-up.
// Targets for packswap's choice, overlapped: exposed_pct <= 5, gemm_slowdown_pct <= 2.
//
// The compute is cuBLAS GEMMs on purpose: a spin kernel shares SMs politely and hides the
// contention this measures. Without a visible GPU the program says so and exits 77 (ctest: skip).
#include <packswap/exchange/cta.hpp>
#include <packswap/exchange/engine.hpp>
#include <packswap/nccl/transport.hpp>

#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int gemm_n = 8192;
constexpr int gemms_per_step = 8;
constexpr std::int32_t ga = 4;
constexpr std::int32_t mbs = 4;
constexpr std::int64_t mib = 1 << 20;

void check_cublas(cublasStatus_t st) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error("cuBLAS failed with status " + std::to_string(static_cast<int>(st)));
  }
}

class event {
 public:
  event() { PACKSWAP_CUDA_TRY(cudaEventCreate(&e_)); }
  ~event() { (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaEventDestroy(e_)); }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

double ms_between(const event& a, const event& b) {
  float ms = 0;
  PACKSWAP_CUDA_TRY(cudaEventElapsedTime(&ms, a.get(), b.get()));
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Everything that lives for the whole program: a one-rank communicator, the compute stream,
// cuBLAS and the GEMM operands, and the payload of one micro-step's packs.
struct gpu {
  ncclComm_t comm = nullptr;
  cudaStream_t compute = nullptr;
  cublasHandle_t blas = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  void* payload = nullptr; // 1 GiB, shared by every pack (sends only read it)
  double gemm_ms = 0;      // eight GEMMs alone, at start-up (what the CTA choice is given)

  gpu() {
    ncclUniqueId id;
    PACKSWAP_NCCL_TRY(ncclGetUniqueId(&id));
    PACKSWAP_NCCL_TRY(ncclCommInitRank(&comm, 1, id, 0));
    PACKSWAP_CUDA_TRY(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    check_cublas(cublasCreate(&blas));
    check_cublas(cublasSetStream(blas, compute));
    const auto operand = static_cast<std::size_t>(gemm_n) * gemm_n * 2; // bf16
    for (void** p : {&a, &b, &c}) {
      PACKSWAP_CUDA_TRY(cudaMalloc(p, operand));
      PACKSWAP_CUDA_TRY(cudaMemset(*p, 0x3c, operand)); // small finite bf16 values
    }
    PACKSWAP_CUDA_TRY(cudaMalloc(&payload, 1024 * mib));
    PACKSWAP_CUDA_TRY(cudaMemset(payload, 0x5a, 1024 * mib));
    std::vector<double> runs;
    for (int i = 0; i < 7; ++i) {
      event start;
      event stop;
      PACKSWAP_CUDA_TRY(cudaEventRecord(start.get(), compute));
      gemms();
      PACKSWAP_CUDA_TRY(cudaEventRecord(stop.get(), compute));
      PACKSWAP_CUDA_TRY(cudaEventSynchronize(stop.get()));
      if (i > 1) {
        runs.push_back(ms_between(start, stop));
      }
    }
    gemm_ms = median(runs);
  }
  ~gpu() {
    (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaDeviceSynchronize());
    for (void* p : {a, b, c, payload}) {
      (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFree(p));
    }
    cublasDestroy(blas);
    (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaStreamDestroy(compute));
    (void)PACKSWAP_NCCL_TRY_NOEXCEPT(ncclCommDestroy(comm));
  }
  gpu(const gpu&) = delete;
  gpu& operator=(const gpu&) = delete;

  void gemms() const {
    const float one = 1.0f;
    const float zero = 0.0f;
    for (int i = 0; i < gemms_per_step; ++i) {
      check_cublas(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, gemm_n, gemm_n, gemm_n, &one, a,
                                CUDA_R_16BF, gemm_n, b, CUDA_R_16BF, gemm_n, &zero, c, CUDA_R_16BF,
                                gemm_n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  }

  // One global batch: mbs packs per micro-step of bytes / mbs each, all from the payload.
  std::vector<packswap::local_pack> packs(std::int64_t bytes) const {
    std::vector<packswap::local_pack> out;
    for (std::int32_t i = 0; i < ga * mbs; ++i) {
      out.push_back({1, bytes / mbs, payload});
    }
    return out;
  }
};

gpu& device() {
  static gpu g;
  return g;
}

// Which CTA limit a row's exchange communicator gets.
constexpr std::int32_t nccl_default_ctas = 0; // NCCL's own choice
constexpr std::int32_t packswap_ctas = -1;    // the engine's automatic rule

packswap::nccl::transport_options options(std::int32_t ctas, std::int64_t bytes) {
  packswap::nccl::transport_options o;
  if (ctas == packswap_ctas) {
    // The rule the engine's automatic policy applies, with the measured GEMM time.
    o.ctas = packswap::cta_policy::fixed(packswap::choose_ctas(
        bytes, static_cast<std::int64_t>(device().gemm_ms * 1e6), packswap::cta_policy{}));
  } else if (ctas == nccl_default_ctas) {
    o.ctas = packswap::cta_policy::nccl_default();
  } else {
    o.ctas = packswap::cta_policy::fixed(ctas);
  }
  return o;
}

// One micro-step's packs sent to this rank itself, into `dst`.
struct self_exchange {
  self_exchange(const gpu& g, std::int64_t bytes, void* dst) {
    for (std::int32_t i = 0; i < mbs; ++i) {
      sends.push_back({0, g.payload, bytes / mbs});
      recvs.push_back({0, static_cast<char*>(dst) + i * (bytes / mbs), bytes / mbs, -1});
    }
  }
  std::vector<packswap::send_op> sends;
  std::vector<packswap::recv_op> recvs;
};

// The exchange of one micro-step alone on an idle GPU.
double exchange_alone_ms(packswap::nccl::transport& t, std::int64_t bytes) {
  gpu& g = device();
  void* dst = t.allocate(static_cast<std::size_t>(bytes));
  self_exchange ops(g, bytes, dst);
  std::vector<double> runs;
  packswap::nccl::transport::request req;
  for (int i = 0; i < 7; ++i) {
    event start;
    event stop;
    PACKSWAP_CUDA_TRY(cudaEventRecord(start.get(), t.stream()));
    t.start_exchange(req, packswap::span<const packswap::send_op>(ops.sends), ops.recvs);
    PACKSWAP_CUDA_TRY(cudaEventRecord(stop.get(), t.stream()));
    PACKSWAP_CUDA_TRY(cudaEventSynchronize(stop.get()));
    if (!t.wait(req, packswap::exchange_clock::now() + std::chrono::seconds(60))) {
      throw std::runtime_error("a self-exchange did not complete");
    }
    if (i > 1) {
      runs.push_back(ms_between(start, stop));
    }
  }
  t.deallocate(dst, static_cast<std::size_t>(bytes));
  return median(runs);
}

// The row's compute with no exchange, in the row's loop shape: `batches` times `steps` micro-steps
// of GEMMs back to back, the host waiting after each batch. Median milliseconds per micro-step.
double gemms_alone_ms(std::int64_t batches, std::int32_t steps) {
  gpu& g = device();
  std::vector<double> spans;
  for (std::int64_t b = 0; b < batches; ++b) {
    std::vector<std::unique_ptr<event>> marks;
    for (std::int32_t m = 0; m <= steps; ++m) {
      marks.push_back(std::make_unique<event>());
    }
    PACKSWAP_CUDA_TRY(cudaEventRecord(marks[0]->get(), g.compute));
    for (std::int32_t m = 0; m < steps; ++m) {
      g.gemms();
      PACKSWAP_CUDA_TRY(cudaEventRecord(marks[static_cast<std::size_t>(m + 1)]->get(), g.compute));
    }
    PACKSWAP_CUDA_TRY(cudaEventSynchronize(marks.back()->get()));
    for (std::int32_t m = 0; m < steps; ++m) {
      spans.push_back(
          ms_between(*marks[static_cast<std::size_t>(m)], *marks[static_cast<std::size_t>(m + 1)]));
    }
  }
  return median(spans);
}

void report(benchmark::State& state, double baseline_ms, double step_ms, double gemm_in_step_ms,
            double exchange_ms, std::int32_t ctas) {
  const double exposed = std::max(0.0, step_ms - baseline_ms);
  state.counters["gemm_ms"] = baseline_ms;
  state.counters["exchange_ms"] = exchange_ms;
  state.counters["exposed_ms"] = exposed;
  state.counters["exposed_pct"] = 100.0 * exposed / exchange_ms;
  state.counters["gemm_slowdown_pct"] = 100.0 * (gemm_in_step_ms / baseline_ms - 1.0);
  state.counters["ctas"] = ctas;
}

// Exchange, then GEMMs, strictly in turn: nothing hides.
void synchronous(benchmark::State& state, std::int64_t bytes, std::int32_t ctas) {
  gpu& g = device();
  packswap::nccl::transport t(packswap::nccl::communicator_ref(g.comm), options(ctas, bytes));
  const double alone = exchange_alone_ms(t, bytes);
  const double baseline = gemms_alone_ms(state.max_iterations, 1);
  void* dst = t.allocate(static_cast<std::size_t>(bytes));
  self_exchange ops(g, bytes, dst);
  packswap::nccl::transport::request req;
  packswap::nccl::transport::fence arrived;
  packswap::nccl::transport::fence computed;
  std::vector<double> steps;
  std::vector<double> gemm_spans;
  for (auto _ : state) {
    event start;
    event gemm_start;
    event stop;
    PACKSWAP_CUDA_TRY(cudaEventRecord(start.get(), g.compute));
    t.record(computed, g.compute);
    t.start_after(computed);
    t.start_exchange(req, packswap::span<const packswap::send_op>(ops.sends), ops.recvs);
    t.mark(arrived);
    t.wait_fence(arrived, g.compute);
    PACKSWAP_CUDA_TRY(cudaEventRecord(gemm_start.get(), g.compute));
    g.gemms();
    PACKSWAP_CUDA_TRY(cudaEventRecord(stop.get(), g.compute));
    PACKSWAP_CUDA_TRY(cudaEventSynchronize(stop.get()));
    if (!t.wait(req, packswap::exchange_clock::now() + std::chrono::seconds(60))) {
      throw std::runtime_error("a self-exchange did not complete");
    }
    const double step = ms_between(start, stop);
    state.SetIterationTime(step / 1e3);
    steps.push_back(step);
    gemm_spans.push_back(ms_between(gemm_start, stop));
  }
  t.deallocate(dst, static_cast<std::size_t>(bytes));
  PACKSWAP_CUDA_TRY(cudaDeviceSynchronize());
  report(state, baseline, median(steps), median(gemm_spans), alone, t.ctas());
}

// The engine: the exchange of micro-step m+1 runs while micro-step m's GEMMs compute.
void overlapped(benchmark::State& state, std::int64_t bytes, std::int32_t ctas) {
  gpu& g = device();
  packswap::nccl::transport t(packswap::nccl::communicator_ref(g.comm), options(ctas, bytes));
  const double alone = exchange_alone_ms(t, bytes);
  const double baseline = gemms_alone_ms(state.max_iterations, ga);
  packswap::engine_options opt;
  opt.exchange_kept_packs = true; // world size 1: every pack crosses NCCL
  std::vector<double> steps;
  std::vector<double> gemm_spans;
  {
    packswap::engine<packswap::nccl::transport> e(t, {1, ga, mbs}, opt);
    const auto packs = g.packs(bytes);
    const auto batch = [&](bool timed) {
      e.submit(packs); // the next batch, one ahead
      std::vector<std::unique_ptr<event>> marks;
      for (int i = 0; i < 2 * ga + 1; ++i) {
        marks.push_back(std::make_unique<event>());
      }
      PACKSWAP_CUDA_TRY(cudaEventRecord(marks[0]->get(), g.compute));
      for (std::int32_t m = 0; m < ga; ++m) {
        e.acquire(m, g.compute);
        PACKSWAP_CUDA_TRY(
            cudaEventRecord(marks[static_cast<std::size_t>(2 * m + 1)]->get(), g.compute));
        g.gemms();
        PACKSWAP_CUDA_TRY(
            cudaEventRecord(marks[static_cast<std::size_t>(2 * m + 2)]->get(), g.compute));
        e.release(m, g.compute);
      }
      PACKSWAP_CUDA_TRY(cudaEventSynchronize(marks.back()->get()));
      if (timed) {
        const double total = ms_between(*marks.front(), *marks.back());
        state.SetIterationTime(total / ga / 1e3);
        steps.push_back(total / ga);
        for (std::int32_t m = 0; m < ga; ++m) {
          gemm_spans.push_back(ms_between(*marks[static_cast<std::size_t>(2 * m + 1)],
                                          *marks[static_cast<std::size_t>(2 * m + 2)]));
        }
      }
    };
    e.submit(packs);
    batch(false); // warm-up: first gather, solve, buffer allocation
    for (auto _ : state) {
      batch(true);
    }
    // The batch submitted last is never computed; let its exchanges finish so that destruction
    // withdraws nothing unfinished.
    PACKSWAP_CUDA_TRY(cudaDeviceSynchronize());
  }
  report(state, baseline, median(steps), median(gemm_spans), alone, t.ctas());
}

} // namespace

int main(int argc, char** argv) {
  if (const std::string why = packswap::nccl::no_device_reason(); !why.empty()) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
  const auto add = [](const std::string& name, auto fn, std::int64_t bytes, std::int32_t ctas) {
    benchmark::RegisterBenchmark(name.c_str(), fn, bytes, ctas)
        ->UseManualTime()
        ->Iterations(50)
        ->Unit(benchmark::kMillisecond);
  };
  for (const std::int64_t size : {256, 1024}) {
    const std::string mb = std::to_string(size) + "MiB/";
    for (const std::int32_t ctas : {nccl_default_ctas, packswap_ctas}) {
      const std::string name = mb + (ctas == packswap_ctas ? "packswap_ctas" : "nccl_default");
      add("synchronous/" + name, synchronous, size * mib, ctas);
      add("overlapped/" + name, overlapped, size * mib, ctas);
    }
    // The trade-off the automatic rule navigates: fewer CTAs take fewer SMs from the GEMMs for
    // longer.
    for (const std::int32_t ctas : {1, 2, 4, 8, 16}) {
      add("overlapped/" + mb + "ctas:" + std::to_string(ctas), overlapped, size * mib, ctas);
    }
  }
  benchmark::Initialize(&argc, argv);
  try {
    device(); // measure the GEMMs once, before any row
    benchmark::RunSpecifiedBenchmarks();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "overlap benchmark failed: %s\n", e.what());
    return 1;
  }
  benchmark::Shutdown();
  return 0;
}
