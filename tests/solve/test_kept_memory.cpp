// A kept solver touches no new memory once its batches stop growing: after a first solve of each
// batch, a solve asks the allocator for no block the size of the batch, on every path of both
// stages. (The C library hands out large blocks as freshly mapped pages, whose first touch each
// solve would pay; small ones, sized by dp or ga, come back from its free lists.) Counted by
// replacing the global operator new, plain and aligned, except in sanitized builds, whose
// runtimes replace it.

#include <packswap/solve.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"
#include "stress.hpp"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#ifndef PACKSWAP_TEST_SANITIZED

namespace {

// Blocks of at least this many bytes count as large: below glibc's threshold for mapping fresh
// pages (128 KiB), and at or below 4 bytes per pack for the batches below.
constexpr std::size_t large_block = std::size_t{64} << 10;
std::atomic<long> large_blocks{0};

void count(std::size_t size) {
  if (size >= large_block) {
    large_blocks.fetch_add(1, std::memory_order_relaxed);
  }
}

void* counted(std::size_t size) {
  count(size);
  if (void* p = std::malloc(size == 0 ? 1 : size)) {
    return p;
  }
  throw std::bad_alloc();
}

// The same for types aligned beyond the default (the search's places are aligned to 32 bytes).
void* counted(std::size_t size, std::align_val_t alignment) {
  count(size);
  const auto align = static_cast<std::size_t>(alignment);
  // aligned_alloc wants a size that is a multiple of the alignment.
  const std::size_t rounded = size == 0 ? align : (size + align - 1) / align * align;
  if (void* p = std::aligned_alloc(align, rounded)) {
    return p;
  }
  throw std::bad_alloc();
}

} // namespace

void* operator new(std::size_t size) {
  return counted(size);
}
void* operator new[](std::size_t size) {
  return counted(size);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  return counted(size, alignment);
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  return counted(size, alignment);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

using namespace packswap;

TEST_CASE("a kept solver asks for no block the size of the batch once its batches stop growing") {
  namespace stress = test::stress;
  struct batch {
    std::string name;
    shape s;
    std::vector<pack_meta> packs;
    solve_options opt;
  };
  solve_options per_step;
  per_step.mode = sync_mode::per_step;
  solve_options own_plan; // two nodes, one rank's plan
  own_plan.topology = topology::uniform(2);
  own_plan.plan_rank = 5;
  const shape wide{1024, 16, 1};
  const shape deep{16, 1024, 1};
  const shape cells{512, 16, 2};
  const std::vector<batch> batches = {
      // The search succeeds and its answer is kept.
      {"vlm 1024 x 16", wide, test::random_batch(wide, 3, test::mix::vlm), {}},
      // The search gives up at its pace: the fallback (renaming, then bring-home) answers.
      {"lognormal 16 x 1024", deep, stress::batch(deep, stress::dist::lognormal, 1), {}},
      // The search succeeds, moves a giant pack away, and is weighed against the fallback.
      {"pareto 1024 x 16", wide, stress::batch(wide, stress::dist::pareto, 1), {}},
      // Cells of several packs: stage 1 by cells, renaming, bring-home under the cell caps.
      {"vlm 512 x 16 x 2", cells, test::random_batch(cells, 4, test::mix::vlm), {}},
      // One sync per step: stage 1 with swaps, each rank's packs sorted into its micro-steps.
      {"vlm 1024 x 16 per step", wide, test::random_batch(wide, 5, test::mix::vlm), per_step},
      // Several nodes, and the plan of one rank only.
      {"vlm 1024 x 16 two nodes", wide, test::random_batch(wide, 6, test::mix::vlm), own_plan},
  };
  solver kept;
  solution out;
  for (int round = 0; round < 2; ++round) { // the first round sizes the kept memory
    for (const auto& b : batches) {
      const long before = large_blocks.load();
      kept.solve(b.packs, b.s, b.opt, out);
      const long made = large_blocks.load() - before;
      if (round == 1) {
        INFO(b.name << ": " << made << " blocks of 64 KiB or more");
        CHECK(made == 0);
      }
    }
  }
}

#endif
