// packswap.solve, packswap.Solver, packswap.Solution and the solve worker of packswap.torch.
#include "common.hpp"
#include "solve_worker.hpp"

#include <packswap/detail/digest.hpp>
#include <packswap/exchange/cta.hpp>
#include <packswap/plan/plan.hpp>
#include <packswap/solve.hpp>

#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace packswap::python {
namespace {

// The keyword arguments every solve entry point takes, turned into the solver's options.
struct solve_args {
  std::int64_t dp = 0;
  std::int64_t ga = 0;
  std::int64_t mbs = 1;
  std::string mode = "per_micro_step";
  double eps = 0.0;
  std::int64_t ranks_per_node = 0;
  std::int64_t plan_rank = -1;
  std::int64_t inter_node_weight = 4;
  std::optional<std::vector<std::int64_t>> node_map;
  bool refine = true;
  bool count_peers = true;
  double work_scale = 1.0;

  shape batch_shape() const {
    return shape{to_int32(dp, "dp"), to_int32(ga, "ga"), to_int32(mbs, "mbs")};
  }

  solve_options options() const {
    solve_options o;
    if (mode == "per_micro_step" || mode == "per-micro-step") {
      o.mode = sync_mode::per_micro_step;
    } else if (mode == "per_step" || mode == "per-step") {
      o.mode = sync_mode::per_step;
    } else {
      throw py::value_error("mode is '" + mode + "', expected 'per_micro_step' or 'per_step'");
    }
    o.eps = eps;
    if (node_map && ranks_per_node != 0) {
      throw py::value_error("give ranks_per_node or node_map, not both");
    }
    if (node_map) {
      std::vector<std::int32_t> nodes;
      nodes.reserve(node_map->size());
      for (const auto n : *node_map) {
        nodes.push_back(to_int32(n, "a node_map entry"));
      }
      o.topology = topology::from_map(std::move(nodes), inter_node_weight);
    } else if (ranks_per_node != 0) {
      o.topology = topology::uniform(to_int32(ranks_per_node, "ranks_per_node"), inter_node_weight);
    }
    o.plan_rank = to_int32(plan_rank, "plan_rank");
    o.refine = refine;
    o.count_peers = count_peers;
    o.work_scale = work_scale;
    return o;
  }
};

// The gathered metadata as the solver reads it. The three arrays are read where they lie when
// they are C-contiguous int64 (see int64_vector); the records are built without the GIL.
struct batch_input {
  py::array_t<std::int64_t> cost, bytes, source;
  std::vector<pack_meta> packs;

  batch_input(py::handle c, py::handle b, py::handle s)
      : cost(int64_vector(c, "cost")), bytes(int64_vector(b, "bytes")),
        source(int64_vector(s, "source_rank")) {
    if (cost.size() != bytes.size() || cost.size() != source.size()) {
      throw py::value_error("cost, bytes and source_rank must have one entry per pack; got " +
                            std::to_string(cost.size()) + ", " + std::to_string(bytes.size()) +
                            " and " + std::to_string(source.size()) + " entries");
    }
  }

  // Fills `packs`; call without the GIL. The solver validates the records; a source rank
  // beyond int32 is reported here in its words, before a cast could wrap it into range.
  void build(std::int32_t dp) {
    const auto n = static_cast<std::size_t>(cost.size());
    const std::int64_t* c = cost.data();
    const std::int64_t* b = bytes.data();
    const std::int64_t* s = source.data();
    packs.resize(n);
    for (std::size_t p = 0; p < n; ++p) {
      PACKSWAP_EXPECTS(s[p] >= INT32_MIN && s[p] <= INT32_MAX, errc::invalid_argument,
                       "pack " << p << " has source rank " << s[p] << ", dp is " << dp);
      packs[p] = pack_meta{c[p], b[p], static_cast<std::int32_t>(s[p])};
    }
  }
};

// What Python sees of a solved batch.
class py_solution {
 public:
  explicit py_solution(std::shared_ptr<const solved_batch> b) : b_(std::move(b)) {
    const auto& cells = b_->sol.cells;
    std::vector<std::int32_t> rank(cells.size());
    std::vector<std::int32_t> step(cells.size());
    for (std::size_t p = 0; p < cells.size(); ++p) {
      rank[p] = cells[p].rank;
      step[p] = cells[p].micro_step;
    }
    rank_ = read_only(adopt(std::move(rank)));
    step_ = read_only(adopt(std::move(step)));
  }

  const solved_batch& batch() const { return *b_; }
  py::array rank() const { return rank_; }
  py::array micro_step() const { return step_; }

  py::dict metrics() const {
    const auto& b = b_->sol.balance;
    const auto& m = b_->sol.movement;
    py::dict d;
    d["A"] = b.a;
    d["LB_A"] = b.lb_a;
    d["B"] = b.b;
    d["LB_B"] = b.lb_b;
    d["moved"] = m.moved;
    d["moved_bytes"] = m.moved_bytes;
    d["weighted_bytes"] = m.weighted_bytes;
    d["inter_node_bytes"] = m.inter_node_bytes;
    d["max_peers"] = m.max_peers;
    d["solve_us"] = b_->solve_us;
    return d;
  }

  py::array transfers(span<const transfer> t) const {
    std::vector<std::int32_t> out(2 * t.size());
    for (std::size_t i = 0; i < t.size(); ++i) {
      out[2 * i] = t[i].pack;
      out[2 * i + 1] = t[i].peer;
    }
    return adopt(std::move(out), static_cast<py::ssize_t>(t.size()), 2);
  }

  static py::array ids(span<const std::int32_t> v) {
    return adopt(std::vector<std::int32_t>(v.begin(), v.end()));
  }

 private:
  static py::array read_only(py::array a) {
    a.attr("setflags")(py::arg("write") = false);
    return a;
  }

  std::shared_ptr<const solved_batch> b_;
  py::array rank_, step_;
};

// A Solution method on one (rank, micro-step) of its plan: `f(solution, plan, rank, step)`,
// with the Python ints checked into int32.
template <class F>
auto per_cell(F f) {
  return [f](const py_solution& s, std::int64_t rank, std::int64_t step) {
    return f(s, s.batch().sol.plan, to_int32(rank, "rank"), to_int32(step, "micro_step"));
  };
}

// packswap.Solver: a solver whose working memory is kept between calls. The mutex makes a
// Solver shared between Python threads safe (calls queue up) instead of a data race.
class py_solver {
 public:
  py_solution solve(batch_input& in, const solve_args& args) {
    const shape s = args.batch_shape();
    const solve_options opt = args.options();
    std::shared_ptr<solved_batch> out;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mutex_);
      in.build(s.dp);
      out = solve_batch(solver_, in.packs, s, opt);
    }
    return py_solution(std::move(out));
  }

  void release() {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mutex_);
    solver_.release();
  }

 private:
  std::mutex mutex_;
  packswap::solver solver_;
};

// packswap._core.SolveWorker: the worker, joined without the GIL when Python drops it (the
// worker never takes the GIL, but a join must not stall every other Python thread).
class py_solve_worker : public solve_worker {
 public:
  py_solve_worker() = default;
  py_solve_worker(const py_solve_worker&) = delete;
  py_solve_worker& operator=(const py_solve_worker&) = delete;
  ~py_solve_worker() {
    if (Py_IsInitialized() != 0 && PyGILState_Check() != 0) {
      py::gil_scoped_release nogil;
      close();
    } else {
      close();
    }
  }
};

// The keyword arguments shared by solve, Solver.solve and SolveWorker.submit.
#define PACKSWAP_SOLVE_KWARGS                                                                      \
  py::arg("dp"), py::arg("ga"),                                                                    \
      py::arg("mbs") = 1, py::arg("mode") = "per_micro_step", py::arg("eps") = 0.0,                \
      py::arg("ranks_per_node") = 0, py::arg("plan_rank") = -1, py::kw_only(),                     \
      py::arg("inter_node_weight") = 4, py::arg("node_map") = py::none(),                          \
      py::arg("refine") = true, py::arg("count_peers") = true, py::arg("work_scale") = 1.0

// The callable pybind11 binds for `f(self..., batch_input&, const solve_args&)`: the three
// arrays and PACKSWAP_SOLVE_KWARGS, after `self` for a method (one `Self`) or nothing for a
// function.
template <class... Self, class F>
auto with_solve_args(F f) {
  return [f](Self&... self, py::handle cost, py::handle bytes, py::handle source_rank,
             std::int64_t dp, std::int64_t ga, std::int64_t mbs, std::string mode, double eps,
             std::int64_t ranks_per_node, std::int64_t plan_rank, std::int64_t inter_node_weight,
             std::optional<std::vector<std::int64_t>> node_map, bool refine, bool count_peers,
             double work_scale) {
    solve_args a;
    a.dp = dp;
    a.ga = ga;
    a.mbs = mbs;
    a.mode = std::move(mode);
    a.eps = eps;
    a.ranks_per_node = ranks_per_node;
    a.plan_rank = plan_rank;
    a.inter_node_weight = inter_node_weight;
    a.node_map = std::move(node_map);
    a.refine = refine;
    a.count_peers = count_peers;
    a.work_scale = work_scale;
    batch_input in(cost, bytes, source_rank);
    return f(self..., in, a);
  };
}

std::chrono::nanoseconds seconds(double s) {
  if (!(s >= 0) || !std::isfinite(s)) {
    throw py::value_error("timeout is " + std::to_string(s) + " s, must be finite and >= 0");
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::min(s, 1e9) * 1e9));
}

} // namespace

void bind_solve(py::module_& m) {
  py::class_<py_solution>(m, "Solution", R"(The solver's decision for one global batch.

``rank`` and ``micro_step`` give every pack's cell (pack id = position in the solver's inputs;
micro-steps in execution order); ``metrics`` has the keys of ``packswap-plan``'s "metrics";
``sends``/``receives``/``keep``/``compute`` give one rank's lists for one micro-step.)")
      .def_property_readonly("rank", &py_solution::rank,
                             "numpy int32, the rank that computes each pack (read-only)")
      .def_property_readonly("micro_step", &py_solution::micro_step,
                             "numpy int32, the micro-step of each pack, in execution order")
      .def_property_readonly("metrics", &py_solution::metrics,
                             "dict: A, LB_A, B, LB_B, moved, moved_bytes, weighted_bytes, "
                             "inter_node_bytes, max_peers, solve_us")
      .def_property_readonly(
          "shape",
          [](const py_solution& s) {
            const auto& b = s.batch().shape;
            return py::make_tuple(b.dp, b.ga, b.mbs);
          },
          "(dp, ga, mbs)")
      .def_property_readonly(
          "plan_rank", [](const py_solution& s) { return s.batch().plan_rank; },
          "whose lists the plan holds (-1: every rank)")
      .def_property_readonly(
          "stage1_a", [](const py_solution& s) { return s.batch().sol.stage1_a; },
          "A after stage 1 (balance, before minimal movement)")
      .def_property_readonly(
          "stage1_b", [](const py_solution& s) { return s.batch().sol.stage1_b; },
          "B after stage 1")
      .def_property_readonly(
          "stage2_work", [](const py_solution& s) { return s.batch().sol.stage2_work; },
          "work units stage 2's searches did (a count, never a clock)")
      .def_property_readonly(
          "stage2_bounded", [](const py_solution& s) { return s.batch().sol.stage2_bounded; },
          "whether stage 2's search ended at its work bound (or gave up before it at its pace); "
          "the answer then keeps stage 1's balance")
      .def_property_readonly(
          "mean_peers", [](const py_solution& s) { return s.batch().sol.movement.mean_peers; },
          "distinct peers per rank, averaged over ranks (0 when count_peers was False)")
      .def("sends",
           per_cell([](const py_solution& s, const plan& p, std::int32_t r, std::int32_t step) {
             return s.transfers(p.sends(r, step));
           }),
           py::arg("rank"), py::arg("micro_step"),
           "numpy (k, 2) int32: (pack, receiver) of what `rank` sends for `micro_step`, sorted by "
           "(receiver, pack)")
      .def("receives",
           per_cell([](const py_solution& s, const plan& p, std::int32_t r, std::int32_t step) {
             return s.transfers(p.receives(r, step));
           }),
           py::arg("rank"), py::arg("micro_step"),
           "numpy (k, 2) int32: (pack, sender) of what `rank` receives for `micro_step`, sorted "
           "by (sender, pack)")
      .def("compute",
           per_cell([](const py_solution&, const plan& p, std::int32_t r, std::int32_t step) {
             return py_solution::ids(p.compute(r, step));
           }),
           py::arg("rank"), py::arg("micro_step"),
           "numpy int32: the packs `rank` computes at `micro_step`, ascending")
      .def("keep",
           per_cell([](const py_solution&, const plan& p, std::int32_t r, std::int32_t step) {
             return py_solution::ids(p.keep(r, step));
           }),
           py::arg("rank"), py::arg("micro_step"),
           "numpy int32: the packs of `rank`'s own loader it computes at `micro_step`")
      .def("send_bytes",
           per_cell([](const py_solution&, const plan& p, std::int32_t r, std::int32_t step) {
             return p.send_bytes(r, step);
           }),
           py::arg("rank"), py::arg("micro_step"), "bytes `rank` sends for `micro_step`")
      .def("receive_bytes",
           per_cell([](const py_solution&, const plan& p, std::int32_t r, std::int32_t step) {
             return p.receive_bytes(r, step);
           }),
           py::arg("rank"), py::arg("micro_step"), "bytes `rank` receives for `micro_step`")
      .def(
          "digest", [](const py_solution& s) { return packswap::digest(s.batch().sol.cells); },
          "the assignment's digest (equal wherever the same batch was solved identically)")
      .def(
          "plan_digest", [](const py_solution& s) { return s.batch().sol.plan.digest(); },
          "the digest of the plan's lists (and its rank range)")
      .def("__repr__", [](const py_solution& s) {
        const auto& b = s.batch();
        return "<packswap.Solution dp=" + std::to_string(b.shape.dp) +
               " ga=" + std::to_string(b.shape.ga) + " mbs=" + std::to_string(b.shape.mbs) +
               " A=" + std::to_string(b.sol.balance.a) + " B=" + std::to_string(b.sol.balance.b) +
               " moved=" + std::to_string(b.sol.movement.moved) + ">";
      });

  m.def("solve", with_solve_args([](batch_input& in, const solve_args& args) {
          const shape s = args.batch_shape();
          const solve_options opt = args.options();
          auto out = std::make_shared<solved_batch>();
          {
            py::gil_scoped_release nogil;
            in.build(s.dp);
            const auto t0 = std::chrono::steady_clock::now();
            out->sol = packswap::solve(in.packs, s, opt);
            out->solve_us =
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                    .count();
          }
          out->shape = s;
          out->plan_rank = opt.plan_rank;
          out->count_peers = opt.count_peers;
          return py_solution(std::move(out));
        }),
        py::arg("cost"), py::arg("bytes"), py::arg("source_rank"), PACKSWAP_SOLVE_KWARGS,
        R"(Solves one global batch: balance, minimal movement, micro-step order, plan.

cost, bytes, source_rank: 1-D integer array-likes, one entry per pack (pack id = position);
int64 numpy arrays are read without a copy. Every rank that calls this with the same inputs
gets the same Solution, bit for bit. The GIL is released while solving. Bad input raises
ValueError with the C++ message.)");

  py::class_<py_solver>(m, "Solver", R"(A solver that keeps its working memory between calls.

Same answers as packswap.solve, bit for bit; a trainer that solves every step keeps one. Calls
from several threads are serialised.)")
      .def(py::init<>())
      .def("solve",
           with_solve_args<py_solver>([](py_solver& self, batch_input& in, const solve_args& args) {
             return self.solve(in, args);
           }),
           py::arg("cost"), py::arg("bytes"), py::arg("source_rank"), PACKSWAP_SOLVE_KWARGS,
           "Like packswap.solve, reusing this solver's working memory.")
      .def("release", &py_solver::release, "Frees the working memory kept from earlier calls.");

  py::class_<py_solve_worker>(m, "SolveWorker", R"(One thread that solves batches in order.

Used by packswap.torch.Rebalancer: submit() copies the batch and returns a ticket, result()
waits for it with the GIL released, close() joins the thread (idempotent; the destructor
joins without holding the GIL).)")
      .def(py::init<>())
      .def("submit",
           with_solve_args<py_solve_worker>(
               [](py_solve_worker& self, batch_input& in, const solve_args& args) {
                 const shape s = args.batch_shape();
                 const solve_options opt = args.options();
                 in.build(s.dp);
                 return self.submit(std::move(in.packs), s, opt);
               }),
           py::arg("cost"), py::arg("bytes"), py::arg("source_rank"), PACKSWAP_SOLVE_KWARGS)
      .def(
          "result",
          [](py_solve_worker& self, std::uint64_t ticket, double timeout_s) -> py::object {
            const auto timeout = seconds(timeout_s);
            std::shared_ptr<solved_batch> out;
            {
              py::gil_scoped_release nogil;
              out = self.take(ticket, timeout);
            }
            if (!out) {
              return py::none();
            }
            return py::cast(py_solution(std::move(out)));
          },
          py::arg("ticket"), py::arg("timeout"),
          "The Solution of `ticket`, or None when `timeout` seconds passed first.")
      .def("close",
           [](py_solve_worker& self) {
             py::gil_scoped_release nogil;
             self.close();
           })
      .def_property_readonly("closed", [](const py_solve_worker& self) { return self.closed(); })
      .def_property_readonly("pending", [](const py_solve_worker& self) { return self.pending(); });

  m.def(
      "digest",
      [](py::handle values) {
        const auto a = int64_vector(values, "values");
        detail::digest d;
        d.u64(static_cast<std::uint64_t>(a.size()));
        const std::int64_t* v = a.data();
        for (py::ssize_t i = 0; i < a.size(); ++i) {
          d.i64(v[i]);
        }
        return d.value();
      },
      py::arg("values"),
      "FNV-1a digest of an integer array's int64 values (and its length): the digest the C++ "
      "library uses to compare data across ranks.");

  m.def(
      "choose_ctas",
      [](std::int64_t bytes, std::int64_t compute_ns, std::int64_t ctas, std::int64_t min_ctas,
         std::int64_t max_ctas, double window_fraction, double bytes_per_second_per_cta) {
        cta_policy p = cta_policy::automatic();
        p.ctas = to_int32(ctas, "ctas");
        p.min_ctas = to_int32(min_ctas, "min_ctas");
        p.max_ctas = to_int32(max_ctas, "max_ctas");
        p.window_fraction = window_fraction;
        p.bytes_per_second_per_cta = bytes_per_second_per_cta;
        return choose_ctas(bytes, compute_ns, p);
      },
      py::arg("bytes"), py::arg("compute_ns"), py::kw_only(), py::arg("ctas") = cta_policy{}.ctas,
      py::arg("min_ctas") = cta_policy{}.min_ctas, py::arg("max_ctas") = cta_policy{}.max_ctas,
      py::arg("window_fraction") = cta_policy{}.window_fraction,
      py::arg("bytes_per_second_per_cta") = cta_policy{}.bytes_per_second_per_cta,
      "The C++ cta_policy::automatic() rule: the fewest CTAs (at least min_ctas) that move "
      "`bytes` per micro-step within window_fraction of `compute_ns`; `ctas` when nothing was "
      "measured (compute_ns <= 0).");

  m.def(
      "_as_int64", [](py::handle obj) -> py::array { return int64_vector(obj, "values"); },
      py::arg("values"),
      "The int64 array the solver reads for `values` (for tests: int64 input is not copied).");
}

} // namespace packswap::python
