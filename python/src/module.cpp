// packswap._core: the pybind11 module behind the `packswap` Python package. The package's
// Python files re-export it; see docs/python.md.
#include "common.hpp"

#include <packswap/version.hpp>

#include <exception>

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  m.doc() = "packswap's solver, cost model and packers (C++), bound for Python";
  m.attr("__version__") = py::str(std::to_string(PACKSWAP_VERSION_MAJOR) + "." +
                                  std::to_string(PACKSWAP_VERSION_MINOR) + "." +
                                  std::to_string(PACKSWAP_VERSION_PATCH));

  // Bad input is a ValueError, anything else a RuntimeError; both keep the C++ message, which
  // names the offending item and its values.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) {
        std::rethrow_exception(p);
      }
    } catch (const packswap::error& e) {
      switch (e.code()) {
      case packswap::errc::invalid_argument:
      case packswap::errc::parse_error:
      case packswap::errc::overflow:
        PyErr_SetString(PyExc_ValueError, e.what());
        return;
      default:
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return;
      }
    }
  });

  // Packing first: the cost bindings name its types in their signatures.
  packswap::python::bind_packing(m);
  packswap::python::bind_cost(m);
  packswap::python::bind_solve(m);
}
