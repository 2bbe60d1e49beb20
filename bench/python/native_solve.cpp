// packswap_bench_native: the C++ solver timed in C++, for bench/python/solve_vs_cpp.py to set
// beside packswap.Solver.solve in the same process. Not part of the package.
#include <packswap/solve.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace py = pybind11;

namespace {

// One batch and one packswap::solver that keeps its working memory and solution between calls,
// as a C++ trainer keeps them (bench/balance/solve.cpp).
class native_solver {
 public:
  native_solver(const py::array_t<std::int64_t, py::array::c_style>& cost,
                const py::array_t<std::int64_t, py::array::c_style>& bytes,
                const py::array_t<std::int64_t, py::array::c_style>& source, std::int32_t dp,
                std::int32_t ga, std::int32_t plan_rank)
      : packs_(static_cast<std::size_t>(cost.size())), shape_{dp, ga, 1} {
    for (std::size_t p = 0; p < packs_.size(); ++p) {
      const auto i = static_cast<py::ssize_t>(p);
      packs_[p] = {cost.at(i), bytes.at(i), static_cast<std::int32_t>(source.at(i))};
    }
    opt_.plan_rank = plan_rank;
  }

  // Seconds of each of `reps` solves.
  std::vector<double> time(int reps) {
    py::gil_scoped_release nogil;
    std::vector<double> out;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      solver_.solve(packs_, shape_, opt_, sol_);
      out.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return out;
  }

 private:
  std::vector<packswap::pack_meta> packs_;
  packswap::shape shape_;
  packswap::solve_options opt_;
  packswap::solver solver_;
  packswap::solution sol_;
};

} // namespace

PYBIND11_MODULE(packswap_bench_native, m) {
  py::class_<native_solver>(m, "NativeSolver")
      .def(py::init<const py::array_t<std::int64_t, py::array::c_style>&,
                    const py::array_t<std::int64_t, py::array::c_style>&,
                    const py::array_t<std::int64_t, py::array::c_style>&, std::int32_t,
                    std::int32_t, std::int32_t>(),
           py::arg("cost"), py::arg("bytes"), py::arg("source_rank"), py::arg("dp"), py::arg("ga"),
           py::arg("plan_rank"))
      .def("time", &native_solver::time, py::arg("reps"));
}
