// The trainer loop on GPUs: one process per GPU, the exchange on NCCL, compute with cuBLAS.
//
//   RANK=0 WORLD_SIZE=1 ./packswap-trainer-nccl                      # one GPU
//   for r in 0 1; do RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r PACKSWAP_NCCL_ID_FILE=/shared/job42.id
//       ./packswap-trainer-nccl & done; wait
//
// RANK / WORLD_SIZE / LOCAL_RANK follow torchrun (OMPI_COMM_WORLD_* work too). With more than one
// rank, rank 0 writes the NCCL unique id to PACKSWAP_NCCL_ID_FILE (a path that does not exist yet,
// on a file system every rank sees) and the others read it from there.
//
// Each rank trains a linear regression: packs of samples live in device memory, the engine moves
// them between GPUs, and the gradient is all-reduced on the data-parallel communicator on the same
// stream as the compute, which is the case CUDA_DEVICE_MAX_CONNECTIONS=1 makes deadlock-prone.
#include <packswap/detail/prng.hpp>
#include <packswap/exchange/engine.hpp>
#include <packswap/nccl/transport.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int dims = 8;
constexpr int steps = 20;

int env_int(const char* a, const char* b, int fallback) {
  for (const char* name : {a, b}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
      return std::atoi(v);
    }
  }
  return fallback;
}

void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(what) + " failed with cuBLAS status " +
                             std::to_string(static_cast<int>(st)));
  }
}

// Rank 0 makes the id; with several ranks it travels through a file every rank can read.
ncclUniqueId unique_id(int rank, int world) {
  ncclUniqueId id{};
  if (rank == 0) {
    PACKSWAP_NCCL_TRY(ncclGetUniqueId(&id));
  }
  if (world == 1) {
    return id;
  }
  const char* path = std::getenv("PACKSWAP_NCCL_ID_FILE");
  if (path == nullptr) {
    throw std::runtime_error("WORLD_SIZE > 1 needs PACKSWAP_NCCL_ID_FILE");
  }
  if (rank == 0) {
    const std::string tmp = std::string(path) + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof(id.internal));
    std::rename(tmp.c_str(), path); // atomic: readers never see half an id
    return id;
  }
  for (int tries = 0; tries < 6000; ++tries) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(id.internal, sizeof(id.internal))) {
      return id;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error(std::string("no NCCL id appeared in ") + path);
}

// One batch of this rank's packs: samples (x[dims], y) as columns of a (dims + 1) x n matrix, in
// pinned host memory, copied to the device on the compute stream. Rank 0 reads the long packs.
struct batch_buffers {
  std::vector<double*> device;
  std::vector<double*> host;
  std::vector<packswap::local_pack> packs;
};

void load(batch_buffers& b, int k, int rank, std::int64_t packs_per_rank, cudaStream_t s) {
  packswap::prng rng(static_cast<std::uint64_t>(k) * 7919 + static_cast<std::uint64_t>(rank));
  const std::int64_t max_samples = 4096;
  if (b.device.empty()) {
    for (std::int64_t i = 0; i < packs_per_rank; ++i) {
      void* d = nullptr;
      void* h = nullptr;
      PACKSWAP_CUDA_TRY(cudaMalloc(&d, max_samples * (dims + 1) * sizeof(double)));
      PACKSWAP_CUDA_TRY(cudaMallocHost(&h, max_samples * (dims + 1) * sizeof(double)));
      b.device.push_back(static_cast<double*>(d));
      b.host.push_back(static_cast<double*>(h));
    }
  }
  b.packs.clear();
  for (std::int64_t i = 0; i < packs_per_rank; ++i) {
    const std::int64_t n = rank == 0 ? rng.uniform(2048, max_samples) : rng.uniform(0, 1024);
    double* h = b.host[static_cast<std::size_t>(i)];
    for (std::int64_t j = 0; j < n; ++j) {
      double y = 0;
      for (int d = 0; d < dims; ++d) {
        const double x = static_cast<double>(rng.uniform(-1000, 1000)) / 1000.0;
        h[j * (dims + 1) + d] = x;
        y += (d % 2 == 0 ? 1.0 : -0.5) * x;
      }
      h[j * (dims + 1) + dims] = y;
    }
    const auto bytes = static_cast<std::size_t>(n) * (dims + 1) * sizeof(double);
    if (bytes > 0) {
      PACKSWAP_CUDA_TRY(cudaMemcpyAsync(b.device[static_cast<std::size_t>(i)], h, bytes,
                                        cudaMemcpyHostToDevice, s));
    }
    b.packs.push_back({n, static_cast<std::int64_t>(bytes), b.device[static_cast<std::size_t>(i)]});
  }
}

} // namespace

int main() {
  const int rank = env_int("RANK", "OMPI_COMM_WORLD_RANK", 0);
  const int world = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", 1);
  const int local = env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", rank);
  if (const std::string why = packswap::nccl::no_device_reason(); !why.empty()) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
  try {
    int devices = 0;
    PACKSWAP_CUDA_TRY(cudaGetDeviceCount(&devices));
    PACKSWAP_CUDA_TRY(cudaSetDevice(local % devices));
    ncclComm_t dp_comm = nullptr;
    const ncclUniqueId id = unique_id(rank, world);
    PACKSWAP_NCCL_TRY(ncclCommInitRank(&dp_comm, world, id, rank));
    cudaStream_t compute = nullptr;
    PACKSWAP_CUDA_TRY(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    cublasHandle_t blas = nullptr;
    check_cublas(cublasCreate(&blas), "cublasCreate");
    check_cublas(cublasSetStream(blas, compute), "cublasSetStream");
    check_cublas(cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");

    const packswap::shape shape{world, /*ga=*/4, /*mbs=*/2};
    // w, then per micro-step scratch: residuals, the gradient + sample count + loss to reduce.
    double* w = nullptr;
    double* residual = nullptr;
    double* reduce = nullptr;    // [0, dims): gradient, [dims]: samples, [dims + 1..]: pack losses
    double* constants = nullptr; // 1, -1, 2
    double* samples_pinned = nullptr;
    const int loss_slots = 64;
    PACKSWAP_CUDA_TRY(cudaMalloc(&w, dims * sizeof(double)));
    PACKSWAP_CUDA_TRY(cudaMalloc(&residual, 4096 * sizeof(double)));
    PACKSWAP_CUDA_TRY(cudaMalloc(&reduce, (dims + 1 + loss_slots) * sizeof(double)));
    PACKSWAP_CUDA_TRY(cudaMalloc(&constants, 4 * sizeof(double)));
    PACKSWAP_CUDA_TRY(cudaMallocHost(&samples_pinned, sizeof(double)));
    const double host_constants[4] = {1.0, -1.0, 2.0, 0.0};
    PACKSWAP_CUDA_TRY(
        cudaMemcpy(constants, host_constants, sizeof(host_constants), cudaMemcpyHostToDevice));
    PACKSWAP_CUDA_TRY(cudaMemset(w, 0, dims * sizeof(double)));
    {
      packswap::nccl::transport transport{packswap::nccl::communicator_ref(dp_comm)};
      packswap::engine<packswap::nccl::transport> engine(transport, shape);
      batch_buffers buffers[3]; // the batch in use, the next one, and one being refilled
      load(buffers[0], 0, rank, shape.packs_per_rank(), compute);
      engine.submit(buffers[0].packs);
      std::vector<double> host(dims + 1 + loss_slots);
      std::vector<double> host_w(dims, 0.0);
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < steps; ++k) {
        if (k + 1 < steps) {
          auto& next = buffers[(k + 1) % 3];
          load(next, k + 1, rank, shape.packs_per_rank(), compute);
          engine.submit(next.packs);
        }
        PACKSWAP_CUDA_TRY(
            cudaMemsetAsync(reduce, 0, (dims + 1 + loss_slots) * sizeof(double), compute));
        int slot = 0;
        double samples_here = 0;
        for (std::int32_t m = 0; m < shape.ga; ++m) {
          const auto cell = engine.acquire(m, compute); // compute waits for the exchange
          for (const auto& p : cell.packs) {
            const int n =
                static_cast<int>(p.bytes / static_cast<std::int64_t>((dims + 1) * sizeof(double)));
            if (n == 0) {
              continue;
            }
            const auto* x = static_cast<const double*>(p.data); // column j: sample j
            // residual = X^T w - y
            check_cublas(cublasDcopy(blas, n, x + dims, dims + 1, residual, 1), "cublasDcopy");
            check_cublas(cublasDgemv(blas, CUBLAS_OP_T, dims, n, constants, x, dims + 1, w, 1,
                                     constants + 1, residual, 1),
                         "cublasDgemv");
            // gradient += 2 X residual; loss slot = residual . residual
            check_cublas(cublasDgemv(blas, CUBLAS_OP_N, dims, n, constants + 2, x, dims + 1,
                                     residual, 1, constants, reduce, 1),
                         "cublasDgemv");
            check_cublas(cublasDdot(blas, n, residual, 1, residual, 1,
                                    reduce + dims + 1 + (slot++ % loss_slots)),
                         "cublasDdot");
            samples_here += n;
          }
          engine.release(m, compute);
        }
        *samples_pinned = samples_here; // the last copy from it finished at the previous sync
        PACKSWAP_CUDA_TRY(cudaMemcpyAsync(reduce + dims, samples_pinned, sizeof(double),
                                          cudaMemcpyHostToDevice, compute));
        // The gradient all-reduce on the caller's communicator and stream, as DDP does it.
        PACKSWAP_NCCL_TRY(ncclAllReduce(reduce, reduce, dims + 1 + loss_slots, ncclDouble, ncclSum,
                                        dp_comm, compute));
        PACKSWAP_CUDA_TRY(cudaMemcpyAsync(host.data(), reduce, host.size() * sizeof(double),
                                          cudaMemcpyDeviceToHost, compute));
        PACKSWAP_CUDA_TRY(cudaStreamSynchronize(compute)); // once per optimizer step, for the log
        double loss = 0;
        for (int i = 0; i < loss_slots; ++i) {
          loss += host[static_cast<std::size_t>(dims + 1 + i)];
        }
        const double samples = host[dims] > 0 ? host[dims] : 1.0;
        for (int d = 0; d < dims; ++d) {
          host_w[static_cast<std::size_t>(d)] -= 0.2 * host[static_cast<std::size_t>(d)] / samples;
        }
        PACKSWAP_CUDA_TRY(cudaMemcpyAsync(w, host_w.data(), dims * sizeof(double),
                                          cudaMemcpyHostToDevice, compute));
        if (rank == 0) {
          std::printf("step %2d  loss %.6f\n", k, loss / samples);
        }
      }
      PACKSWAP_CUDA_TRY(cudaStreamSynchronize(compute));
      const auto st = engine.stats();
      if (rank == 0) {
        std::printf("%d steps in %.3f s; %lld packs received, %lld kept in place; CTA limit %d\n",
                    steps,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                    static_cast<long long>(st.packs_received),
                    static_cast<long long>(st.packs_kept), st.ctas);
      }
      for (auto& b : buffers) {
        for (double* d : b.device) {
          (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFree(d));
        }
        for (double* h : b.host) {
          (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFreeHost(h));
        }
      }
    }
    (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFree(w));
    (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFree(residual));
    (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFree(reduce));
    (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFree(constants));
    (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFreeHost(samples_pinned));
    cublasDestroy(blas);
    (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaStreamDestroy(compute));
    (void)PACKSWAP_NCCL_TRY_NOEXCEPT(ncclCommDestroy(dp_comm));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
