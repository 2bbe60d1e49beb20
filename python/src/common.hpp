#pragma once

// Shared by the binding sources: array conversion without surprises, arrays handed out without a
// copy, and the submodule entry points that module.cpp calls.

#include <packswap/error.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace packswap::python {

namespace py = pybind11;

/// `obj` as a 1-D `int64` array: a C-contiguous native `int64` array is used as it is (no copy);
/// any other integer array-like (numpy arrays of another integer type or a strided view, lists,
/// CPU torch tensors through `__array__`) is converted once. Throws `ValueError` naming `what`
/// for anything else: floats, booleans, objects, more or fewer than one dimension, and unsigned
/// values beyond the int64 range. An empty 1-D sequence is an empty int64 array whatever its
/// dtype (an empty list has none).
inline py::array_t<std::int64_t> int64_vector(py::handle obj, const char* what) {
  using exact = py::array_t<std::int64_t, py::array::c_style>;
  if (exact::check_(obj)) {
    auto a = py::reinterpret_borrow<exact>(obj);
    if (a.ndim() == 1) {
      return a;
    }
  }
  py::array arr = py::array::ensure(obj);
  if (!arr || arr.ndim() == 0) { // numpy makes a 0-d array of any object
    throw py::value_error(std::string(what) + " must be a 1-D integer array-like, got " +
                          std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  }
  if (arr.ndim() != 1) {
    throw py::value_error(std::string(what) + " must be 1-D, got an array of shape " +
                          std::string(py::str(arr.attr("shape"))));
  }
  if (arr.size() == 0) {
    return py::array_t<std::int64_t>(0);
  }
  const char kind = arr.dtype().kind();
  if (kind != 'i' && kind != 'u') {
    throw py::value_error(std::string(what) + " must hold integers, got dtype " +
                          std::string(py::str(arr.dtype())));
  }
  if (kind == 'u' && arr.itemsize() == 8) {
    const auto u =
        py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
    const std::uint64_t* v = u.data();
    for (py::ssize_t i = 0; i < u.size(); ++i) {
      if (v[i] > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        throw py::value_error(std::string(what) + "[" + std::to_string(i) + "] is " +
                              std::to_string(v[i]) + ", beyond the int64 range");
      }
    }
  }
  return py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
}

/// A 1-D numpy array that takes ownership of `v`'s storage (a capsule frees it): no copy.
template <class T>
py::array_t<T> adopt(std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>({static_cast<py::ssize_t>(owned->size())}, owned->data(), free_when_done);
}

/// A 2-D numpy array of `rows` x `cols`, row-major, owning `v` (`v.size() == rows * cols`).
template <class T>
py::array_t<T> adopt(std::vector<T>&& v, py::ssize_t rows, py::ssize_t cols) {
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>({rows, cols}, owned->data(), free_when_done);
}

/// `value` as an `int32`, or `ValueError` naming `what` (Python ints are unbounded).
inline std::int32_t to_int32(std::int64_t value, const char* what) {
  if (value < std::numeric_limits<std::int32_t>::min() ||
      value > std::numeric_limits<std::int32_t>::max()) {
    throw py::value_error(std::string(what) + " is " + std::to_string(value) +
                          ", beyond the int32 range");
  }
  return static_cast<std::int32_t>(value);
}

void bind_solve(py::module_& m);
void bind_cost(py::module_& m);
void bind_packing(py::module_& m);

} // namespace packswap::python
