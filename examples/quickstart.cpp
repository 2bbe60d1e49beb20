// Quick start: every rank gathers a few integers per pack, runs the same solver, and gets the
// same plan: which packs it computes at each micro-step, which it sends, which it receives.
#include <packswap/packswap.hpp>

#include <cstdio>
#include <vector>

int main() {
  const packswap::shape shape{/*dp=*/4, /*ga=*/4};
  const packswap::cost_model cost;       // ViT forward + backward in µs (DESIGN.md §3 defaults)
  const packswap::payload_model payload; // bytes: token ids and pixels
  // One record per pack: cost, bytes, the rank whose loader produced it. Rank 0's loader
  // happened to produce the image-heavy packs.
  std::vector<packswap::pack_meta> packs;
  for (int rank = 0; rank < shape.dp; ++rank) {
    for (int i = 0; i < shape.ga; ++i) {
      packswap::pack_features f;
      f.tokens = 8192;
      f.images = 2;
      f.image_tokens = rank == 0 ? 5000 + 200 * i : 600 * i;
      packs.push_back({cost(f), payload(f), rank});
    }
  }
  const auto sol = packswap::solve(packs, shape);
  std::printf("A = %lld us (lower bound %lld), B = %lld us (lower bound %lld), %lld of %zu packs move\n",
              static_cast<long long>(sol.balance.a), static_cast<long long>(sol.balance.lb_a),
              static_cast<long long>(sol.balance.b), static_cast<long long>(sol.balance.lb_b),
              static_cast<long long>(sol.movement.moved), packs.size());
  for (int step = 0; step < shape.ga; ++step) {
    std::printf("micro-step %d, rank 0:", step);
    for (auto p : sol.plan.keep(0, step)) std::printf(" keeps %d", p);
    for (auto t : sol.plan.sends(0, step)) std::printf(" sends %d->%d", t.pack, t.peer);
    for (auto t : sol.plan.receives(0, step)) std::printf(" receives %d<-%d", t.pack, t.peer);
    std::printf("\n");
  }
  return sol.balance.a == sol.balance.lb_a ? 0 : 1;
}
