// Every rank gathers a few integers per pack, runs the same solver and gets the same plan: the
// packs it computes at each micro-step, the ones it sends and the ones it receives.
#include <packswap/packswap.hpp>

#include <iostream>
#include <vector>

int main() {
  const packswap::shape shape{/*dp=*/4, /*ga=*/4};
  const packswap::cost_model cost;        // ViT forward + backward in µs (DESIGN.md defaults)
  const packswap::payload_model payload;  // bytes: token ids and pixels
  std::vector<packswap::pack_meta> packs; // {cost, bytes, source rank} per pack, all-gathered
  for (int rank = 0; rank < shape.dp; ++rank) {
    for (int i = 0; i < shape.ga; ++i) {
      packswap::pack_features f;
      f.tokens = 8192;
      f.images = 2;
      f.image_tokens = rank == 0 ? 5000 + 200 * i : 600 * i; // rank 0 got the heavy packs
      packs.push_back({cost(f), payload(f), rank});
    }
  }
  const packswap::solution sol = packswap::solve(packs, shape); // the same on every rank
  std::cout << "A = " << sol.balance.a << " us (lower bound " << sol.balance.lb_a
            << "), B = " << sol.balance.b << " us (lower bound " << sol.balance.lb_b << "), "
            << sol.movement.moved << " of " << packs.size() << " packs move\n";
  for (int step = 0; step < shape.ga; ++step) { // rank 0's part of the plan
    std::cout << "micro-step " << step << ", rank 0:";
    for (auto p : sol.plan.keep(0, step))
      std::cout << " keeps " << p;
    for (auto t : sol.plan.sends(0, step))
      std::cout << " sends " << t.pack << "->" << t.peer;
    for (auto t : sol.plan.receives(0, step))
      std::cout << " receives " << t.pack << "<-" << t.peer;
    std::cout << '\n';
  }
  return sol.balance.a == sol.balance.lb_a ? 0 : 1;
}
