// The NCCL backend on a GPU. NCCL accepts one rank per GPU (DESIGN.md §5), so this runs at world
// size 1 and routes every pack through NCCL self-sends (engine_options::exchange_kept_packs).
// Without a visible GPU it prints why and exits 77, which ctest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include "support.hpp"

#include <packswap/exchange/engine.hpp>
#include <packswap/nccl/transport.hpp>

#include <cuda_runtime.h>
#include <doctest/doctest.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using packswap::nccl::transport;
namespace pt = packswap::test;

static_assert(packswap::is_transport_v<transport>);

namespace {

// A one-rank NCCL communicator: the "data-parallel group" the exchange splits from.
struct solo_comm {
  solo_comm() {
    ncclUniqueId id;
    PACKSWAP_NCCL_TRY(ncclGetUniqueId(&id));
    PACKSWAP_NCCL_TRY(ncclCommInitRank(&comm, 1, id, 0));
  }
  ~solo_comm() { (void)PACKSWAP_NCCL_TRY_NOEXCEPT(ncclCommDestroy(comm)); }
  solo_comm(const solo_comm&) = delete;
  solo_comm& operator=(const solo_comm&) = delete;
  ncclComm_t comm = nullptr;
};

struct cuda_stream {
  cuda_stream() { PACKSWAP_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~cuda_stream() { (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaStreamDestroy(s)); }
  cuda_stream(const cuda_stream&) = delete;
  cuda_stream& operator=(const cuda_stream&) = delete;
  cudaStream_t s = nullptr;
};

// One batch's payloads, uploaded to the device.
struct device_batch {
  pt::rank_batch host;
  std::vector<void*> buffers;
  std::vector<packswap::local_pack> packs;
  device_batch() = default;
  device_batch(const device_batch&) = delete;
  device_batch& operator=(const device_batch&) = delete;
  ~device_batch() {
    for (void* p : buffers) {
      (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFree(p));
    }
  }
  void make(std::uint64_t seed, std::int64_t k, std::int64_t n, std::int64_t max_bytes) {
    pt::make_batch(host, seed, k, 0, n, max_bytes);
    packs = host.packs;
    for (auto& p : packs) {
      void* d = nullptr;
      if (p.bytes > 0) {
        PACKSWAP_CUDA_TRY(cudaMalloc(&d, static_cast<std::size_t>(p.bytes)));
        PACKSWAP_CUDA_TRY(
            cudaMemcpy(d, p.data, static_cast<std::size_t>(p.bytes), cudaMemcpyHostToDevice));
        buffers.push_back(d);
      }
      p.data = d;
    }
  }
};

struct run_result {
  std::int64_t intact = 0;
  std::int64_t wrong = 0;
  std::int64_t through_nccl = 0;
  std::int64_t in_place = 0;
  std::int32_t ctas = -1;
};

// Runs `batches` batches of shape {1, ga, mbs}; after each micro-step a one-rank all-reduce on the
// caller's stream stands for the gradient collective the exchange must not deadlock with.
run_result run(const packswap::nccl::transport_options& topt, const packswap::engine_options& opt,
               std::int32_t ga, std::int32_t mbs, std::int64_t batches, std::int64_t max_bytes) {
  solo_comm parent;
  cuda_stream compute;
  run_result out;
  std::vector<device_batch> data(static_cast<std::size_t>(batches));
  for (std::int64_t k = 0; k < batches; ++k) {
    data[static_cast<std::size_t>(k)].make(31, k, std::int64_t{ga} * mbs, max_bytes);
  }
  float* grad = nullptr;
  PACKSWAP_CUDA_TRY(cudaMalloc(&grad, 1024 * sizeof(float)));
  PACKSWAP_CUDA_TRY(cudaMemset(grad, 0, 1024 * sizeof(float)));
  {
    transport t(packswap::nccl::communicator_ref(parent.comm), topt);
    packswap::engine<transport> e(t, {1, ga, mbs}, opt);
    std::vector<unsigned char> got;
    std::vector<unsigned char> expect;
    e.submit(data[0].packs);
    for (std::int64_t k = 0; k < batches; ++k) {
      if (k + 1 < batches) {
        e.submit(data[static_cast<std::size_t>(k + 1)].packs);
      }
      for (std::int32_t m = 0; m < ga; ++m) {
        const auto cell = e.acquire(m, compute.s);
        for (const auto& p : cell.packs) {
          got.resize(static_cast<std::size_t>(p.bytes));
          if (p.bytes > 0) {
            PACKSWAP_CUDA_TRY(
                cudaMemcpyAsync(got.data(), p.data, got.size(), cudaMemcpyDeviceToHost, compute.s));
          }
          PACKSWAP_CUDA_TRY(cudaStreamSynchronize(compute.s));
          pt::fill_payload(expect, 31, k, 0, p.source_index, p.bytes);
          (got == expect ? out.intact : out.wrong) += 1;
          const void* own = data[static_cast<std::size_t>(k)]
                                .packs[static_cast<std::size_t>(p.source_index)]
                                .data;
          (p.kept ? out.in_place : out.through_nccl) += 1;
          if (p.kept) {
            CHECK(p.data == own); // used in place: the submitted device buffer itself
          }
        }
        PACKSWAP_NCCL_TRY(
            ncclAllReduce(grad, grad, 1024, ncclFloat, ncclSum, parent.comm, compute.s));
        e.release(m, compute.s);
      }
    }
    out.ctas = e.stats().ctas;
    PACKSWAP_CUDA_TRY(cudaStreamSynchronize(compute.s));
  }
  PACKSWAP_CUDA_TRY(cudaFree(grad));
  return out;
}

} // namespace

TEST_CASE("nccl: every pack crosses NCCL through self-sends and arrives byte-identical") {
  packswap::engine_options opt;
  opt.exchange_kept_packs = true;
  opt.timeout = std::chrono::seconds(60);
  for (std::int32_t depth : {1, 2}) {
    opt.prefetch_depth = depth;
    const auto r = run({}, opt, 4, 8, 3, 1 << 20);
    CHECK(r.wrong == 0);
    CHECK(r.intact == 3 * 4 * 8);
    CHECK(r.through_nccl == 3 * 4 * 8);
    MESSAGE("prefetch depth " << depth << ": " << r.intact << " packs byte-identical, CTA limit "
                              << r.ctas);
  }
}

TEST_CASE("nccl: kept packs are used in place, never copied") {
  packswap::engine_options opt;
  opt.timeout = std::chrono::seconds(60);
  const auto r = run({}, opt, 2, 4, 2, 1 << 16);
  CHECK(r.wrong == 0);
  CHECK(r.in_place == 2 * 2 * 4);
  CHECK(r.through_nccl == 0);
}

TEST_CASE("nccl: a fixed CTA limit is applied, and the automatic one re-splits after measuring") {
  packswap::engine_options opt;
  opt.exchange_kept_packs = true;
  opt.timeout = std::chrono::seconds(60);
  packswap::nccl::transport_options fixed;
  fixed.ctas = packswap::cta_policy::fixed(2);
  const auto a = run(fixed, opt, 2, 4, 3, 1 << 20);
  CHECK(a.wrong == 0);
  CHECK(a.ctas == 2);
  packswap::nccl::transport_options def;
  def.ctas = packswap::cta_policy::nccl_default();
  const auto b = run(def, opt, 2, 4, 3, 1 << 20);
  CHECK(b.wrong == 0);
  CHECK(b.ctas == 0);
  const auto c = run({}, opt, 2, 4, 4, 1 << 20); // automatic
  CHECK(c.wrong == 0);
  CHECK(c.ctas >= 1);
  MESSAGE("automatic CTA limit after measuring: " << c.ctas);
}

TEST_CASE("nccl: the check macros keep the status and name the call") {
  try {
    PACKSWAP_CUDA_TRY(cudaSetDevice(-1));
    FAIL("no error");
  } catch (const packswap::nccl::cuda_error& e) {
    CHECK(e.code() == packswap::errc::cuda);
    CHECK(e.status() == cudaErrorInvalidDevice);
    CHECK(std::string(e.what()).find("cudaSetDevice(-1) failed at") != std::string::npos);
  }
  CHECK(cudaGetLastError() == cudaSuccess); // cleared: it does not leak into later checks
  try {
    PACKSWAP_NCCL_TRY(ncclCommCount(nullptr, nullptr));
    FAIL("no error");
  } catch (const packswap::nccl::nccl_error& e) {
    CHECK(e.code() == packswap::errc::nccl);
    CHECK(e.status() != ncclSuccess);
  }
}

TEST_CASE("nccl: an nccl_error thrown on the engine's worker reaches the caller as nccl_error") {
  const auto caught = pt::fail_two_ranks([](pt::throwing_transport& t) {
    t.wait_at = 3;
    t.raise = [] { throw packswap::nccl::nccl_error(ncclRemoteError, "a peer went away"); };
  });
  try {
    std::rethrow_exception(caught.first[1]);
  } catch (const packswap::nccl::nccl_error& e) {
    CHECK(e.status() == ncclRemoteError);
    CHECK(e.code() == packswap::errc::nccl);
    CHECK(std::string(e.what()).find("rank 1, batch ") != std::string::npos);
  } catch (...) {
    FAIL("not an nccl_error: " << pt::what_of(caught.first[1]));
  }
}

int main(int argc, char** argv) {
  if (const std::string why = packswap::nccl::no_device_reason(); !why.empty()) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
