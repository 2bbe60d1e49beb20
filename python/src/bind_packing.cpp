// packswap.SampleSet, PackList, GreedyPacker, BudgetedPacker, measure_packing and the workload
// presets (Workload, SampleKind, generate).
#include "common.hpp"

#include <packswap/packing/budgeted_packer.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/metrics.hpp>
#include <packswap/packing/pack_list.hpp>
#include <packswap/packing/sample.hpp>
#include <packswap/packing/sample_csv.hpp>
#include <packswap/packing/workload.hpp>

#include <pybind11/stl.h>

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace packswap::python {
namespace {

oversize_policy policy_named(const std::string& name) {
  if (name == "reject") {
    return oversize_policy::reject;
  }
  if (name == "skip") {
    return oversize_policy::skip;
  }
  throw py::value_error("on_oversize is '" + name + "', expected 'reject' or 'skip'");
}

const char* policy_name(oversize_policy p) {
  return p == oversize_policy::skip ? "skip" : "reject";
}

template <class T>
py::array copy_of(span<const T> v) {
  return adopt(std::vector<T>(v.begin(), v.end()));
}

std::vector<std::int64_t> int64_list(py::handle obj, const char* what) {
  const auto a = int64_vector(obj, what);
  return std::vector<std::int64_t>(a.data(), a.data() + a.size());
}

using band_tuple = std::tuple<std::int64_t, std::int64_t, std::int64_t>;

std::vector<band_tuple> bands_out(const std::vector<weighted_band>& v) {
  std::vector<band_tuple> out;
  for (const auto& b : v) {
    out.emplace_back(b.weight, b.lo, b.hi);
  }
  return out;
}

std::vector<weighted_band> bands_in(const std::vector<band_tuple>& v) {
  std::vector<weighted_band> out;
  for (const auto& [w, lo, hi] : v) {
    out.push_back(weighted_band{w, lo, hi});
  }
  return out;
}

const sample_set& check_index(const sample_set& s, std::int64_t i) {
  if (i < 0 || static_cast<std::size_t>(i) >= s.size()) {
    throw py::index_error("sample " + std::to_string(i) + " is outside the set of " +
                          std::to_string(s.size()) + " samples");
  }
  return s;
}

const pack_list& check_pack(const pack_list& p, std::int64_t i) {
  if (i < 0 || static_cast<std::size_t>(i) >= p.size()) {
    throw py::index_error("pack " + std::to_string(i) + " is outside the list of " +
                          std::to_string(p.size()) + " packs");
  }
  return p;
}

// A per-pack count of a pack_list (`tokens`, `image_tokens`) for one pack, and for all.
using pack_count = std::int64_t (pack_list::*)(std::size_t) const noexcept;

auto one_pack(pack_count count) {
  return [count](const pack_list& p, std::int64_t i) {
    return (check_pack(p, i).*count)(static_cast<std::size_t>(i));
  };
}

auto every_pack(pack_count count) {
  return [count](const pack_list& p) {
    std::vector<std::int64_t> v(p.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = (p.*count)(i);
    }
    return adopt(std::move(v));
  };
}

} // namespace

void bind_packing(py::module_& m) {
  py::class_<sample_set>(m, "SampleSet", R"(An ordered stream of samples (what the packers read).

A sample has `tokens` (image tokens included), the token count of each image, and the lengths of
its documents (adding up to `tokens`; default: one document). Counts are validated as samples are
added (ValueError naming the sample).

    s = packswap.SampleSet()
    s.push_back(1800)                          # text only
    s.push_back(2100, images=[1024, 256])      # two images
    s.push_back(1600, documents=[700, 900])    # two documents)")
      .def(py::init<>())
      .def(
          "push_back",
          [](sample_set& s, std::int64_t tokens, py::handle images, py::handle documents) {
            const auto im = int64_list(images, "images");
            const auto doc = int64_list(documents, "documents");
            s.push_back(tokens, span<const std::int64_t>(im), span<const std::int64_t>(doc));
          },
          py::arg("tokens"), py::arg("images") = py::tuple(), py::arg("documents") = py::tuple(),
          "Appends one sample.")
      .def("__len__", &sample_set::size)
      .def(
          "tokens",
          [](const sample_set& s, std::int64_t i) {
            return check_index(s, i).tokens(static_cast<std::size_t>(i));
          },
          py::arg("i"), "Tokens of sample i (image tokens included).")
      .def(
          "tokens", [](const sample_set& s) { return copy_of(s.tokens()); },
          "Tokens of every sample (int32 array).")
      .def(
          "image_tokens",
          [](const sample_set& s, std::int64_t i) {
            return check_index(s, i).image_tokens(static_cast<std::size_t>(i));
          },
          py::arg("i"))
      .def(
          "image_tokens", [](const sample_set& s) { return copy_of(s.image_tokens()); },
          "Image tokens of every sample (int32 array).")
      .def(
          "images",
          [](const sample_set& s, std::int64_t i) {
            return copy_of(check_index(s, i).images(static_cast<std::size_t>(i)));
          },
          py::arg("i"), "Token count of each image of sample i (int32 array).")
      .def(
          "documents",
          [](const sample_set& s, std::int64_t i) {
            return copy_of(check_index(s, i).documents(static_cast<std::size_t>(i)));
          },
          py::arg("i"), "Length of each document of sample i (int32 array).")
      .def_property_readonly("total_tokens", &sample_set::total_tokens)
      .def_property_readonly("total_image_tokens", &sample_set::total_image_tokens)
      .def_property_readonly("total_images", &sample_set::total_images)
      .def_static(
          "from_csv",
          [](const std::string& text) {
            std::istringstream in(text);
            return read_sample_csv(in);
          },
          py::arg("text"),
          "Reads the CSV of packswap-pack / packswap-sim (header naming tokens, images, "
          "documents).")
      .def(
          "to_csv",
          [](const sample_set& s) {
            std::ostringstream out;
            write_sample_csv(out, s);
            return out.str();
          },
          "The CSV `from_csv` reads.");

  py::class_<pack_list>(m, "PackList", R"(The packs a packer made: sample ids per pack.)")
      .def("__len__", &pack_list::size)
      .def(
          "samples",
          [](const pack_list& p, std::int64_t i) {
            return copy_of(check_pack(p, i).samples(static_cast<std::size_t>(i)));
          },
          py::arg("pack"), "Sample ids of pack `pack`, in placement order (int32 array).")
      .def("tokens", one_pack(&pack_list::tokens), py::arg("pack"), "Tokens in pack `pack`.")
      .def("tokens", every_pack(&pack_list::tokens), "Tokens of every pack (int64 array).")
      .def("image_tokens", one_pack(&pack_list::image_tokens), py::arg("pack"),
           "Image tokens in pack `pack`.")
      .def("image_tokens", every_pack(&pack_list::image_tokens),
           "Image tokens of every pack (int64 array).")
      .def_property_readonly("capacity", &pack_list::capacity)
      .def_property_readonly("image_budget", &pack_list::image_budget)
      .def_property_readonly("total_tokens", &pack_list::total_tokens)
      .def_property_readonly("total_image_tokens", &pack_list::total_image_tokens)
      .def_property_readonly("total_samples", &pack_list::total_samples)
      .def(
          "skipped", [](const pack_list& p) { return copy_of(p.skipped()); },
          "Samples left out under on_oversize='skip' (int32 array).");

  py::class_<greedy_packer>(m, "GreedyPacker", R"(The 1D packer: streaming best fit into packs
of `capacity` tokens with a buffer of `buffer` candidates (image tokens ignored).

    packs = packswap.GreedyPacker(capacity=8192, buffer=1000)(samples))")
      .def(py::init([](std::int64_t capacity, std::int64_t buffer, std::int64_t lookahead,
                       const std::string& on_oversize) {
             greedy_packer p;
             p.capacity = capacity;
             p.buffer = buffer;
             p.lookahead = lookahead;
             p.on_oversize = policy_named(on_oversize);
             return p;
           }),
           py::kw_only(), py::arg("capacity") = 8192, py::arg("buffer") = 1000,
           py::arg("lookahead") = 16, py::arg("on_oversize") = "reject")
      .def_readwrite("capacity", &greedy_packer::capacity)
      .def_readwrite("buffer", &greedy_packer::buffer)
      .def_readwrite("lookahead", &greedy_packer::lookahead)
      .def_property(
          "on_oversize", [](const greedy_packer& p) { return policy_name(p.on_oversize); },
          [](greedy_packer& p, const std::string& v) { p.on_oversize = policy_named(v); })
      .def(
          "__call__",
          [](const greedy_packer& p, const sample_set& s) {
            py::gil_scoped_release nogil;
            return p(s);
          },
          py::arg("samples"), "Packs `samples` into a PackList.");

  py::class_<budgeted_packer>(m, "BudgetedPacker", R"(The 2D packer: packs of at most `capacity`
tokens and at most `image_budget` image tokens (balanced but emptier packs).)")
      .def(py::init([](std::int64_t capacity, std::int64_t image_budget, std::int64_t buffer,
                       std::int64_t lookahead, const std::string& on_oversize) {
             budgeted_packer p;
             p.capacity = capacity;
             p.image_budget = image_budget;
             p.buffer = buffer;
             p.lookahead = lookahead;
             p.on_oversize = policy_named(on_oversize);
             return p;
           }),
           py::kw_only(), py::arg("capacity") = 8192, py::arg("image_budget") = 4096,
           py::arg("buffer") = 1000, py::arg("lookahead") = 16, py::arg("on_oversize") = "reject")
      .def_readwrite("capacity", &budgeted_packer::capacity)
      .def_readwrite("image_budget", &budgeted_packer::image_budget)
      .def_readwrite("buffer", &budgeted_packer::buffer)
      .def_readwrite("lookahead", &budgeted_packer::lookahead)
      .def_property(
          "on_oversize", [](const budgeted_packer& p) { return policy_name(p.on_oversize); },
          [](budgeted_packer& p, const std::string& v) { p.on_oversize = policy_named(v); })
      .def(
          "__call__",
          [](const budgeted_packer& p, const sample_set& s) {
            py::gil_scoped_release nogil;
            return p(s);
          },
          py::arg("samples"), "Packs `samples` into a PackList.");

  py::class_<packing_metrics>(m, "PackingMetrics", "How well a PackList is packed.")
      .def_readonly("samples", &packing_metrics::samples)
      .def_readonly("skipped", &packing_metrics::skipped)
      .def_readonly("packs", &packing_metrics::packs)
      .def_readonly("capacity", &packing_metrics::capacity)
      .def_readonly("tokens", &packing_metrics::tokens)
      .def_readonly("image_tokens", &packing_metrics::image_tokens)
      .def_property_readonly("efficiency", &packing_metrics::efficiency,
                             "real tokens / (packs x capacity)")
      .def_property_readonly(
          "image_tokens_per_pack",
          [](const packing_metrics& pm) {
            const auto& p = pm.image_tokens_per_pack;
            py::dict d;
            d["min"] = p.min;
            d["median"] = p.median;
            d["p90"] = p.p90;
            d["p99"] = p.p99;
            d["max"] = p.max;
            return d;
          },
          "nearest-rank percentiles: min, median, p90, p99, max");
  m.def("measure_packing", &measure_packing, py::arg("packs"),
        "Efficiency, pack count and the image-token distribution of `packs`.");
  m.def("mean_image_tokens_per_pack", &mean_image_tokens_per_pack, py::arg("packs"),
        "Mean image tokens per pack (rounded): the usual image budget to try for BudgetedPacker.");

  py::class_<sample_kind>(m, "SampleKind", R"(One kind of sample in a workload mix.

Bands are (weight, lo, hi) tuples: integers uniform in [lo, hi], picked by weight. An image is
width x height merged patches, each side drawn from one band of `image_sides`.)")
      .def(py::init([](std::string name, std::int64_t weight, std::int64_t min_images,
                       std::int64_t max_images, const std::vector<band_tuple>& image_sides,
                       const std::vector<band_tuple>& text_tokens, std::int64_t min_documents,
                       std::int64_t max_documents) {
             sample_kind k;
             k.name = std::move(name);
             k.weight = weight;
             k.min_images = min_images;
             k.max_images = max_images;
             k.image_sides = bands_in(image_sides);
             k.text_tokens = bands_in(text_tokens);
             k.min_documents = min_documents;
             k.max_documents = max_documents;
             return k;
           }),
           py::arg("name"), py::kw_only(), py::arg("weight") = 1, py::arg("min_images") = 0,
           py::arg("max_images") = 0, py::arg("image_sides") = std::vector<band_tuple>{},
           py::arg("text_tokens") = std::vector<band_tuple>{}, py::arg("min_documents") = 1,
           py::arg("max_documents") = 1)
      .def_readwrite("name", &sample_kind::name)
      .def_readwrite("weight", &sample_kind::weight)
      .def_readwrite("min_images", &sample_kind::min_images)
      .def_readwrite("max_images", &sample_kind::max_images)
      .def_property(
          "image_sides", [](const sample_kind& k) { return bands_out(k.image_sides); },
          [](sample_kind& k, const std::vector<band_tuple>& v) { k.image_sides = bands_in(v); })
      .def_property(
          "text_tokens", [](const sample_kind& k) { return bands_out(k.text_tokens); },
          [](sample_kind& k, const std::vector<band_tuple>& v) { k.text_tokens = bands_in(v); })
      .def_readwrite("min_documents", &sample_kind::min_documents)
      .def_readwrite("max_documents", &sample_kind::max_documents)
      .def("__repr__", [](const sample_kind& k) {
        return "<packswap.SampleKind '" + k.name + "' weight=" + std::to_string(k.weight) + ">";
      });

  py::class_<workload>(m, "Workload", R"(A named mix of sample kinds that `generate` draws from.)")
      .def(py::init([](std::string name, std::vector<sample_kind> kinds,
                       std::int64_t max_sample_tokens, std::string description) {
             workload w;
             w.name = std::move(name);
             w.kinds = std::move(kinds);
             w.max_sample_tokens = max_sample_tokens;
             w.description = std::move(description);
             validate(w);
             return w;
           }),
           py::arg("name"), py::arg("kinds"), py::kw_only(), py::arg("max_sample_tokens") = 8192,
           py::arg("description") = "")
      .def_readwrite("name", &workload::name)
      .def_readwrite("description", &workload::description)
      .def_readwrite("kinds", &workload::kinds)
      .def_readwrite("max_sample_tokens", &workload::max_sample_tokens)
      .def("__repr__", [](const workload& w) { return "<packswap.Workload '" + w.name + "'>"; });

  m.def("workload_preset", &workload_preset, py::arg("name"),
        "A named workload: 'vlm-pretrain' (the default), 'captioning', 'high-res', 'text-only'.");
  m.def("workload_preset_names", &workload_preset_names, "The preset names, the default first.");
  m.def(
      "generate",
      [](const workload& w, std::int64_t count, std::uint64_t seed) {
        py::gil_scoped_release nogil;
        return generate(w, count, seed);
      },
      py::arg("workload"), py::arg("count"), py::arg("seed"),
      "`count` samples drawn from `workload`, bit-identical for (workload, count, seed) on every "
      "platform (the simulator's and the C++ benchmarks' streams).");
  m.def(
      "generate",
      [](const std::string& preset, std::int64_t count, std::uint64_t seed) {
        const auto w = workload_preset(preset);
        py::gil_scoped_release nogil;
        return generate(w, count, seed);
      },
      py::arg("workload"), py::arg("count"), py::arg("seed"), "`generate` with a preset's name.");
}

} // namespace packswap::python
