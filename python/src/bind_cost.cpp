// packswap.CostModel, PayloadModel, PackFeatures, calibrate, features_of, make_pack_meta.
#include "common.hpp"

#include <packswap/cost/calibrate.hpp>
#include <packswap/cost/cost_model.hpp>
#include <packswap/cost/features.hpp>
#include <packswap/cost/pack_meta.hpp>
#include <packswap/cost/payload.hpp>
#include <packswap/cost/presets.hpp>

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

namespace packswap::python {
namespace {

// The columns of a feature matrix, in `pack_features` order.
constexpr const char* feature_names[] = {
    "samples",         "tokens",    "image_tokens",      "images",
    "image_tokens_sq", "documents", "document_tokens_sq"};
constexpr py::ssize_t feature_count = 7;

std::vector<std::int64_t> to_row(const pack_features& f) {
  return {f.samples,         f.tokens,    f.image_tokens,      f.images,
          f.image_tokens_sq, f.documents, f.document_tokens_sq};
}

pack_features from_row(const std::int64_t* r) {
  return pack_features{r[0], r[1], r[2], r[3], r[4], r[5], r[6]};
}

// Features of many packs: an (n, 7) integer array in `feature_names` order, or a sequence of
// PackFeatures.
std::vector<pack_features> feature_rows(py::handle obj) {
  if (py::isinstance<py::sequence>(obj) && !py::isinstance<py::array>(obj)) {
    auto seq = py::reinterpret_borrow<py::sequence>(obj);
    if (seq.size() > 0 && py::isinstance<pack_features>(seq[0])) {
      std::vector<pack_features> out;
      out.reserve(seq.size());
      for (std::size_t i = 0; i < seq.size(); ++i) {
        if (!py::isinstance<pack_features>(seq[i])) {
          throw py::value_error("features[" + std::to_string(i) + "] is not a PackFeatures");
        }
        out.push_back(seq[i].cast<pack_features>());
      }
      return out;
    }
  }
  py::array arr = py::array::ensure(obj);
  if (!arr || arr.ndim() != 2 || arr.shape(1) != feature_count) {
    throw py::value_error("features must be an (n, 7) integer array (columns: samples, tokens, "
                          "image_tokens, images, image_tokens_sq, documents, document_tokens_sq) "
                          "or a sequence of PackFeatures");
  }
  if (arr.size() > 0 && arr.dtype().kind() != 'i' && arr.dtype().kind() != 'u') {
    throw py::value_error("features must hold integers, got dtype " +
                          std::string(py::str(arr.dtype())));
  }
  const auto a = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
  std::vector<pack_features> out(static_cast<std::size_t>(a.shape(0)));
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = from_row(a.data() + i * feature_count);
  }
  return out;
}

py::array feature_matrix(const std::vector<pack_features>& f) {
  std::vector<std::int64_t> flat;
  flat.reserve(f.size() * feature_count);
  for (const auto& x : f) {
    for (const auto v : to_row(x)) {
      flat.push_back(v);
    }
  }
  return adopt(std::move(flat), static_cast<py::ssize_t>(f.size()), feature_count);
}

cost_term term_named(const std::string& name) {
  for (const auto t : all_cost_terms) {
    if (name == to_string(t)) {
      return t;
    }
  }
  std::string known;
  for (const auto t : all_cost_terms) {
    known += (known.empty() ? "" : ", ") + std::string(to_string(t));
  }
  throw py::value_error("unknown cost term '" + name + "' (known: " + known + ")");
}

std::vector<std::int64_t> costs_of(const cost_model& model, const std::vector<pack_features>& f) {
  std::vector<std::int64_t> out(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    out[i] = model(f[i]);
  }
  return out;
}

} // namespace

void bind_cost(py::module_& m) {
  m.attr("FEATURES") =
      py::make_tuple(feature_names[0], feature_names[1], feature_names[2], feature_names[3],
                     feature_names[4], feature_names[5], feature_names[6]);
  {
    py::tuple terms(all_cost_terms.size());
    for (std::size_t i = 0; i < all_cost_terms.size(); ++i) {
      terms[i] = to_string(all_cost_terms[i]);
    }
    m.attr("COST_TERMS") = terms;
  }

  py::class_<pack_features>(m, "PackFeatures", R"(What a pack's cost and payload depend on.

Fields (ints): samples, tokens (image tokens included), image_tokens, images, image_tokens_sq
(sum over images of tokens^2), documents, document_tokens_sq (sum over documents of length^2).)")
      .def(py::init([](std::int64_t samples, std::int64_t tokens, std::int64_t image_tokens,
                       std::int64_t images, std::int64_t image_tokens_sq, std::int64_t documents,
                       std::int64_t document_tokens_sq) {
             return pack_features{samples,         tokens,    image_tokens,      images,
                                  image_tokens_sq, documents, document_tokens_sq};
           }),
           py::kw_only(), py::arg("samples") = 0, py::arg("tokens") = 0,
           py::arg("image_tokens") = 0, py::arg("images") = 0, py::arg("image_tokens_sq") = 0,
           py::arg("documents") = 0, py::arg("document_tokens_sq") = 0)
      .def_readwrite("samples", &pack_features::samples)
      .def_readwrite("tokens", &pack_features::tokens)
      .def_readwrite("image_tokens", &pack_features::image_tokens)
      .def_readwrite("images", &pack_features::images)
      .def_readwrite("image_tokens_sq", &pack_features::image_tokens_sq)
      .def_readwrite("documents", &pack_features::documents)
      .def_readwrite("document_tokens_sq", &pack_features::document_tokens_sq)
      .def("__eq__", [](const pack_features& a, const pack_features& b) { return a == b; })
      .def(
          "as_tuple", [](const pack_features& f) { return py::tuple(py::cast(to_row(f))); },
          "The seven fields in FEATURES order.")
      .def("__repr__", [](const pack_features& f) {
        const auto r = to_row(f);
        std::string s = "PackFeatures(";
        for (py::ssize_t i = 0; i < feature_count; ++i) {
          s += (i == 0 ? "" : ", ") + std::string(feature_names[i]) + "=" +
               std::to_string(r[static_cast<std::size_t>(i)]);
        }
        return s + ")";
      });

  py::class_<cost_model>(m, "CostModel", R"(What one pack costs the GPU, in integer microseconds.

cost_us = round((pack_fs + vit_fixed_fs [if the pack has an image] + vit_per_image_token_fs *
image_tokens + vit_attention_fs * image_tokens_sq + llm_per_token_fs * tokens + llm_attention_fs *
document_tokens_sq) / 1e9), coefficients in femtoseconds per unit, every step integer and
overflow-checked, so every rank gets the same cost. The defaults are the measured ViT (forward
60 ms + 0.28 ms per image token, backward twice that); `calibrate` fits your own.

    model = packswap.CostModel()                 # the defaults
    us = model(packswap.PackFeatures(images=1, image_tokens=3000))
    costs = model.costs(feature_matrix)          # (n, 7) ints -> int64 array)")
      .def(py::init([](std::int64_t pack_fs, std::int64_t vit_fixed_fs,
                       std::int64_t vit_per_image_token_fs, std::int64_t vit_attention_fs,
                       std::int64_t llm_per_token_fs, std::int64_t llm_attention_fs) {
             return cost_model{pack_fs,          vit_fixed_fs,     vit_per_image_token_fs,
                               vit_attention_fs, llm_per_token_fs, llm_attention_fs};
           }),
           py::kw_only(), py::arg("pack_fs") = cost_model{}.pack_fs,
           py::arg("vit_fixed_fs") = cost_model{}.vit_fixed_fs,
           py::arg("vit_per_image_token_fs") = cost_model{}.vit_per_image_token_fs,
           py::arg("vit_attention_fs") = cost_model{}.vit_attention_fs,
           py::arg("llm_per_token_fs") = cost_model{}.llm_per_token_fs,
           py::arg("llm_attention_fs") = cost_model{}.llm_attention_fs)
      .def_readwrite("pack_fs", &cost_model::pack_fs)
      .def_readwrite("vit_fixed_fs", &cost_model::vit_fixed_fs)
      .def_readwrite("vit_per_image_token_fs", &cost_model::vit_per_image_token_fs)
      .def_readwrite("vit_attention_fs", &cost_model::vit_attention_fs)
      .def_readwrite("llm_per_token_fs", &cost_model::llm_per_token_fs)
      .def_readwrite("llm_attention_fs", &cost_model::llm_attention_fs)
      .def(
          "__call__", [](const cost_model& model, const pack_features& f) { return model(f); },
          py::arg("features"), "The cost of one pack, in microseconds.")
      .def(
          "costs",
          [](const cost_model& model, py::handle features) {
            return adopt(costs_of(model, feature_rows(features)));
          },
          py::arg("features"), "Costs of many packs: (n, 7) features -> int64 array of n.")
      .def_static("vit_l14_h200_bf16", &vit_l14_h200_bf16,
                  R"(A ViT-L/14-like encoder's forward + backward on one H200 in bf16, fitted by
./scripts/gpu-vit (docs/vit-calibration.md): 5.2 ms per pack with images, 4.66 us per image token,
1.28 ns per image token squared (summed over images). Encoder terms only.)")
      .def_static("so400m_h200_bf16", &so400m_h200_bf16,
                  R"(A So400m-like encoder's forward + backward on one H200 in bf16, fitted by
./scripts/gpu-vit (docs/vit-calibration.md): 6.3 ms per pack with images, 6.35 us per image token,
2.22 ns per image token squared (summed over images). Encoder terms only.)")
      .def("__eq__",
           [](const cost_model& a, const cost_model& b) {
             return a.pack_fs == b.pack_fs && a.vit_fixed_fs == b.vit_fixed_fs &&
                    a.vit_per_image_token_fs == b.vit_per_image_token_fs &&
                    a.vit_attention_fs == b.vit_attention_fs &&
                    a.llm_per_token_fs == b.llm_per_token_fs &&
                    a.llm_attention_fs == b.llm_attention_fs;
           })
      .def("__repr__", [](const cost_model& c) {
        return "CostModel(pack_fs=" + std::to_string(c.pack_fs) +
               ", vit_fixed_fs=" + std::to_string(c.vit_fixed_fs) +
               ", vit_per_image_token_fs=" + std::to_string(c.vit_per_image_token_fs) +
               ", vit_attention_fs=" + std::to_string(c.vit_attention_fs) +
               ", llm_per_token_fs=" + std::to_string(c.llm_per_token_fs) +
               ", llm_attention_fs=" + std::to_string(c.llm_attention_fs) + ")";
      });

  py::class_<payload_model>(m, "PayloadModel", R"(The bytes a pack's exchange moves.

bytes = bytes_per_pack + bytes_per_text_token * (tokens - image_tokens) + bytes_per_image_token *
image_tokens; defaults: 4 bytes per text token, 4,704 per image token (a 28 x 28 patch, 3 bf16
channels), 0 per pack.)")
      .def(py::init([](std::int64_t text, std::int64_t image, std::int64_t pack) {
             return payload_model{text, image, pack};
           }),
           py::kw_only(), py::arg("bytes_per_text_token") = payload_model{}.bytes_per_text_token,
           py::arg("bytes_per_image_token") = payload_model{}.bytes_per_image_token,
           py::arg("bytes_per_pack") = payload_model{}.bytes_per_pack)
      .def_readwrite("bytes_per_text_token", &payload_model::bytes_per_text_token)
      .def_readwrite("bytes_per_image_token", &payload_model::bytes_per_image_token)
      .def_readwrite("bytes_per_pack", &payload_model::bytes_per_pack)
      .def(
          "__call__", [](const payload_model& p, const pack_features& f) { return p(f); },
          py::arg("features"))
      .def(
          "bytes",
          [](const payload_model& p, py::handle features) {
            const auto f = feature_rows(features);
            std::vector<std::int64_t> out(f.size());
            for (std::size_t i = 0; i < f.size(); ++i) {
              out[i] = p(f[i]);
            }
            return adopt(std::move(out));
          },
          py::arg("features"), "Payloads of many packs: (n, 7) features -> int64 array of n.");

  py::class_<calibration>(m, "Calibration", "What `calibrate` found.")
      .def_readonly("model", &calibration::model, "the fitted CostModel (terms not fitted are 0)")
      .def_property_readonly(
          "zeroed",
          [](const calibration& c) {
            std::vector<std::string> out;
            for (const auto t : c.zeroed) {
              out.emplace_back(to_string(t));
            }
            return out;
          },
          "terms the unconstrained fit made negative, fixed at 0 (the rest fitted again)")
      .def_readonly("rms_error_us", &calibration::rms_error_us,
                    "root mean square of model(features) - measured, in microseconds")
      .def_readonly("max_error_us", &calibration::max_error_us,
                    "largest |model(features) - measured|")
      .def_readonly("r_squared", &calibration::r_squared,
                    "1 - residual sum of squares / total sum of squares")
      .def("__repr__", [](const calibration& c) {
        return "<packswap.Calibration r_squared=" + std::to_string(c.r_squared) +
               " rms_error_us=" + std::to_string(c.rms_error_us) +
               " max_error_us=" + std::to_string(c.max_error_us) + ">";
      });

  m.def(
      "calibrate",
      [](py::handle features, py::handle microseconds,
         std::optional<std::vector<std::string>> terms) {
        const auto f = feature_rows(features);
        py::array times = py::array::ensure(microseconds);
        if (!times || times.ndim() != 1) {
          throw py::value_error("microseconds must be a 1-D array of measured times");
        }
        if (times.size() > 0 && times.dtype().kind() != 'f' && times.dtype().kind() != 'i' &&
            times.dtype().kind() != 'u') {
          throw py::value_error("microseconds must hold numbers, got dtype " +
                                std::string(py::str(times.dtype())));
        }
        const auto t =
            py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(times);
        if (static_cast<std::size_t>(t.size()) != f.size()) {
          throw py::value_error("got features of " + std::to_string(f.size()) + " packs and " +
                                std::to_string(t.size()) + " times");
        }
        std::vector<pack_timing> rows(f.size());
        for (std::size_t i = 0; i < f.size(); ++i) {
          rows[i] = pack_timing{f[i], t.data()[i]};
        }
        std::vector<cost_term> chosen;
        if (terms) {
          for (const auto& name : *terms) {
            chosen.push_back(term_named(name));
          }
        } else {
          chosen.assign(all_cost_terms.begin(), all_cost_terms.end());
        }
        py::gil_scoped_release nogil;
        return packswap::calibrate(rows, span<const cost_term>(chosen));
      },
      py::arg("features"), py::arg("microseconds"), py::arg("terms") = py::none(),
      R"(Fits CostModel coefficients to measured pack times by least squares.

features: (n, 7) integers (FEATURES order) or a sequence of PackFeatures; microseconds: n
measured times (forward plus backward); terms: names from COST_TERMS to fit (default: all six),
the others stay 0. Coefficients stay >= 0 (a term the fit makes negative is fixed at 0 and listed
in `zeroed`). Raises ValueError for too few rows, a negative or non-finite time, or terms the
measurements cannot tell apart.

    fit = packswap.calibrate(features, times, terms=["vit_fixed", "vit_per_image_token"])
    print(fit.r_squared, fit.model))");

  m.def(
      "features_of",
      [](const sample_set& set, const pack_list& packs) {
        std::vector<pack_features> f;
        {
          py::gil_scoped_release nogil;
          f = features_of(set, packs);
        }
        return feature_matrix(f);
      },
      py::arg("samples"), py::arg("packs"),
      "The features of every pack of `packs` (packed from `samples`): an (n, 7) int64 array in "
      "FEATURES order.");
  m.def(
      "features_of",
      [](const sample_set& set, py::handle ids) {
        const auto a = int64_vector(ids, "ids");
        std::vector<std::int32_t> v(static_cast<std::size_t>(a.size()));
        for (std::size_t i = 0; i < v.size(); ++i) {
          v[i] = to_int32(a.data()[i], "a sample id");
        }
        return features_of(set, span<const std::int32_t>(v));
      },
      py::arg("samples"), py::arg("ids"),
      "The PackFeatures of the samples `ids` of `samples` taken together as one pack.");

  m.def(
      "make_pack_meta",
      [](py::handle features, std::int64_t dp, std::int64_t ga, std::int64_t mbs,
         const cost_model& cost, const payload_model& payload) {
        const auto f = feature_rows(features);
        const shape s{to_int32(dp, "dp"), to_int32(ga, "ga"), to_int32(mbs, "mbs")};
        std::vector<pack_meta> meta;
        {
          py::gil_scoped_release nogil;
          meta = make_pack_meta(span<const pack_features>(f), s, cost, payload);
        }
        std::vector<std::int64_t> c(meta.size()), b(meta.size()), r(meta.size());
        for (std::size_t p = 0; p < meta.size(); ++p) {
          c[p] = meta[p].cost;
          b[p] = meta[p].bytes;
          r[p] = meta[p].source_rank;
        }
        return py::make_tuple(adopt(std::move(c)), adopt(std::move(b)), adopt(std::move(r)));
      },
      py::arg("features"), py::arg("dp"), py::arg("ga"), py::arg("mbs") = 1,
      py::arg("cost") = cost_model{}, py::arg("payload") = payload_model{},
      R"(The solver's inputs for one global batch: (cost, bytes, source_rank) int64 arrays.

features: exactly dp * ga * mbs packs; rank r loaded packs [r*K, (r+1)*K), K = ga * mbs (each
rank reads a contiguous shard), as in the simulator.

    cost, nbytes, src = packswap.make_pack_meta(features[:dp * ga], dp, ga)
    sol = packswap.solve(cost, nbytes, src, dp=dp, ga=ga))");
}

} // namespace packswap::python
