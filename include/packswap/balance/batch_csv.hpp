#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/csv.hpp"
#include "packswap/error.hpp"

#include <cstdint>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace packswap {

/// Reads one global batch from CSV: a header `pack,source_rank,cost,bytes`, then one row per
/// pack with pack ids 0, 1, 2, ... in order. Blank lines and lines starting with `#` are
/// skipped; a trailing `\r` is ignored. Any other deviation throws `errc::parse_error` naming
/// the line and the field, e.g. `line 7: cost "12x" is not an integer`. Shape checks (pack count,
/// ranks owning ga * mbs packs, non-negative values) are `validate_batch`'s job, which `solve`
/// runs.
///
/// ```
/// std::ifstream in("packs.csv");
/// auto packs = packswap::read_batch_csv(in);
/// auto sol = packswap::solve(packs, {64, 16});
/// ```
[[nodiscard]] inline std::vector<pack_meta> read_batch_csv(std::istream& in) {
  static constexpr std::string_view header = "pack,source_rank,cost,bytes";
  static constexpr const char* names[] = {"pack", "source_rank", "cost", "bytes"};
  std::vector<pack_meta> packs;
  std::vector<std::string_view> fields;
  std::string line;
  std::int64_t line_no = 0;
  bool seen_header = false;
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view view(line);
    if (!view.empty() && view.back() == '\r') {
      view.remove_suffix(1);
    }
    if (view.find_first_not_of(" \t") == std::string_view::npos || view.front() == '#') {
      continue;
    }
    if (!seen_header) {
      PACKSWAP_EXPECTS(view == header, errc::parse_error,
                       "line " << line_no << ": expected the header \"" << header << "\", got \""
                               << view.substr(0, 80) << "\"");
      seen_header = true;
      continue;
    }
    detail::csv_split(view, ',', fields);
    PACKSWAP_EXPECTS(fields.size() == 4, errc::parse_error,
                     "line " << line_no << ": expected 4 fields (" << header << "), got "
                             << fields.size());
    std::int64_t value[4] = {};
    for (std::size_t f = 0; f < 4; ++f) {
      PACKSWAP_EXPECTS(detail::csv_int(fields[f], value[f]), errc::parse_error,
                       "line " << line_no << ": " << names[f] << " \"" << fields[f].substr(0, 40)
                               << "\" is not an integer");
    }
    PACKSWAP_EXPECTS(value[0] == static_cast<std::int64_t>(packs.size()), errc::parse_error,
                     "line " << line_no << ": pack " << value[0] << " out of order, expected pack "
                             << packs.size());
    PACKSWAP_EXPECTS(value[1] >= 0 && value[1] <= INT32_MAX, errc::parse_error,
                     "line " << line_no << ": source_rank " << value[1] << " is out of range");
    packs.push_back({value[2], value[3], static_cast<std::int32_t>(value[1])});
  }
  PACKSWAP_EXPECTS(seen_header, errc::parse_error,
                   "no header: expected \"" << header << "\" on the first line");
  return packs;
}

/// Writes `packs` as the CSV `read_batch_csv` reads.
inline void write_batch_csv(std::ostream& out, span<const pack_meta> packs) {
  out << "pack,source_rank,cost,bytes\n";
  for (std::size_t p = 0; p < packs.size(); ++p) {
    out << p << ',' << packs[p].source_rank << ',' << packs[p].cost << ',' << packs[p].bytes
        << '\n';
  }
}

} // namespace packswap
