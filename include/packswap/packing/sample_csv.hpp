#pragma once

#include "packswap/detail/csv.hpp"
#include "packswap/error.hpp"
#include "packswap/packing/sample.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace packswap {

/// Reads per-sample statistics from CSV text: one sample per row, in stream order.
///
/// The first line that is neither blank nor a `#` comment is the header; it names the columns,
/// in any order: `tokens` (required: all tokens of the sample, image tokens included), `images`
/// (optional: the token count of each image, `;`-separated, empty for none) and `documents`
/// (optional: the document lengths, `;`-separated, adding up to `tokens`; empty for one document).
/// Every other row has one field per column. Fields may be padded with spaces; blank lines, `#`
/// comment lines and CRLF line ends are accepted; quoting is not (no field needs it).
///
/// ```
/// tokens,images,documents
/// 1800,,
/// 2100,1024;256,
/// 1600,,700;900
/// ```
///
/// Throws `errc::parse_error` naming the line (1-based) and the field for a malformed row, an
/// unknown or repeated column, or a count out of range ("line 7, field 'images': '12;x' is not a
/// ';'-separated list of integers"; "line 9: sample 7 has 0 tokens, must be in [1, 2147483647]").
///
/// ```
/// std::ifstream file("stats.csv");
/// packswap::sample_set samples = packswap::read_sample_csv(file);
/// ```
[[nodiscard]] inline sample_set read_sample_csv(std::istream& in) {
  constexpr std::array<std::string_view, 3> known = {"tokens", "images", "documents"};
  sample_set out;
  std::vector<int> column; // column index -> index in `known`
  std::vector<std::string_view> fields;
  std::vector<std::string_view> items;
  std::array<std::vector<std::int64_t>, 3> values;
  std::string line;
  std::int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string_view text = detail::csv_trim(line);
    if (text.empty() || text.front() == '#') {
      continue;
    }
    detail::csv_split(text, ',', fields);
    if (column.empty()) {
      std::array<bool, 3> seen{};
      for (const auto f : fields) {
        std::size_t k = 0;
        while (k < known.size() && known[k] != f) {
          ++k;
        }
        PACKSWAP_EXPECTS(k < known.size(), errc::parse_error,
                         "line " << line_no << ": unknown column '" << f
                                 << "' (known: tokens, images, documents)");
        PACKSWAP_EXPECTS(!seen[k], errc::parse_error,
                         "line " << line_no << ": column '" << f << "' appears twice");
        seen[k] = true;
        column.push_back(static_cast<int>(k));
      }
      PACKSWAP_EXPECTS(seen[0], errc::parse_error,
                       "line " << line_no << ": the header has no 'tokens' column");
      continue;
    }
    PACKSWAP_EXPECTS(fields.size() == column.size(), errc::parse_error,
                     "line " << line_no << ": " << fields.size() << " fields, the header has "
                             << column.size());
    for (auto& v : values) {
      v.clear();
    }
    for (std::size_t c = 0; c < fields.size(); ++c) {
      const auto k = static_cast<std::size_t>(column[c]);
      auto& v = values[k];
      if (k == 0) {
        std::int64_t x = 0;
        PACKSWAP_EXPECTS(detail::csv_int(fields[c], x), errc::parse_error,
                         "line " << line_no << ", field 'tokens': '" << fields[c]
                                 << "' is not an integer in int64 range");
        v.push_back(x);
        continue;
      }
      if (fields[c].empty()) {
        continue;
      }
      detail::csv_split(fields[c], ';', items);
      for (const auto item : items) {
        std::int64_t x = 0;
        PACKSWAP_EXPECTS(detail::csv_int(item, x), errc::parse_error,
                         "line " << line_no << ", field '" << known[k] << "': '" << fields[c]
                                 << "' is not a ';'-separated list of integers in int64 range");
        v.push_back(x);
      }
    }
    try {
      out.push_back(values[0][0], values[1], values[2]);
    } catch (const error& e) {
      // Same check, reported where the user can find it: the file's line.
      const std::string what = e.what();
      const auto colon = what.find("]: ");
      PACKSWAP_FAIL(errc::parse_error,
                    "line " << line_no << ": "
                            << (colon == std::string::npos ? what : what.substr(colon + 3)));
    }
  }
  PACKSWAP_EXPECTS(!in.bad(), errc::parse_error, "reading failed after line " << line_no);
  return out;
}

/// Writes `set` in the format `read_sample_csv` reads (header `tokens,images,documents`; a
/// sample of one document writes an empty `documents` field). Sets the stream's state on failure
/// as streams do; does not throw by itself.
inline void write_sample_csv(std::ostream& out, const sample_set& set) {
  out << "tokens,images,documents\n";
  for (std::size_t i = 0; i < set.size(); ++i) {
    out << set.tokens(i) << ',';
    const auto images = set.images(i);
    for (std::size_t j = 0; j < images.size(); ++j) {
      out << (j == 0 ? "" : ";") << images[j];
    }
    out << ',';
    const auto docs = set.documents(i);
    if (docs.size() > 1) {
      for (std::size_t d = 0; d < docs.size(); ++d) {
        out << (d == 0 ? "" : ";") << docs[d];
      }
    }
    out << '\n';
  }
}

} // namespace packswap
