#pragma once

// Field helpers shared by the CSV readers (samples, batches).

#include <charconv>
#include <cstdint>
#include <string_view>
#include <system_error>
#include <vector>

namespace packswap::detail {

inline std::string_view csv_trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Splits `s` at every `sep`; an empty `s` gives one empty field.
inline void csv_split(std::string_view s, char sep, std::vector<std::string_view>& out) {
  out.clear();
  for (;;) {
    const auto at = s.find(sep);
    out.push_back(csv_trim(s.substr(0, at)));
    if (at == std::string_view::npos) {
      return;
    }
    s.remove_prefix(at + 1);
  }
}

// Parses a whole field as one decimal integer (optional sign); false on anything else.
inline bool csv_int(std::string_view s, std::int64_t& out) noexcept {
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
  }
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, out);
  return !s.empty() && r.ec == std::errc() && r.ptr == end;
}

} // namespace packswap::detail
