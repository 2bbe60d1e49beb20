#pragma once

// Small helpers shared by the command-line tools in examples/: option parsing and JSON output.
// Not part of the library.

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace packswap::cli {

/// A usage error: the tool prints it with its usage line and exits with status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// `--name value` options and `--flag` switches. Every name must be declared, so a typo is an
/// error rather than silently ignored.
class options {
 public:
  options(int argc, char** argv, const std::vector<std::string>& valued,
          const std::vector<std::string>& flags) {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg.rfind("--", 0) != 0) {
        throw usage_error("unexpected argument '" + arg + "'");
      }
      std::string name = arg.substr(2);
      std::string value;
      const auto eq = name.find('=');
      const bool inline_value = eq != std::string::npos;
      if (inline_value) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (contains(flags, name)) {
        if (inline_value) {
          throw usage_error("--" + name + " takes no value");
        }
        flags_[name] = true;
      } else if (contains(valued, name)) {
        if (!inline_value) {
          if (i + 1 >= argc) {
            throw usage_error("--" + name + " needs a value");
          }
          value = argv[++i];
        }
        values_[name] = value;
      } else {
        throw usage_error("unknown option --" + name);
      }
    }
  }

  bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }

  std::string text(const std::string& name, const std::string& fallback) const {
    const auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }

  std::int64_t integer(const std::string& name, std::int64_t fallback, std::int64_t min,
                       std::int64_t max) const {
    const auto it = values_.find(name);
    if (it == values_.end()) {
      return fallback;
    }
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || errno == ERANGE || v < min || v > max) {
      throw usage_error("--" + name + " is '" + it->second + "', expected an integer in [" +
                        std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    return v;
  }

  double real(const std::string& name, double fallback, double min, double max) const {
    const auto it = values_.find(name);
    if (it == values_.end()) {
      return fallback;
    }
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || !std::isfinite(v) || v < min || v > max) {
      std::ostringstream os;
      os << "--" << name << " is '" << it->second << "', expected a number in [" << min << ", "
         << max << "]";
      throw usage_error(os.str());
    }
    return v;
  }

  /// A comma-separated list of words.
  std::vector<std::string> texts(const std::string& name, const std::string& fallback) const {
    std::vector<std::string> out;
    std::stringstream ss(text(name, fallback));
    std::string item;
    while (std::getline(ss, item, ',')) {
      out.push_back(item);
    }
    if (out.empty()) {
      throw usage_error("--" + name + " is empty");
    }
    return out;
  }

  /// A comma-separated list of numbers, each in [min, max].
  std::vector<double> reals(const std::string& name, const std::string& fallback, double min,
                            double max) const {
    std::vector<double> out;
    for (const auto& item : texts(name, fallback)) {
      char* end = nullptr;
      const double v = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0' || !std::isfinite(v) || v < min || v > max) {
        std::ostringstream os;
        os << "--" << name << " has '" << item << "', expected numbers in [" << min << ", " << max
           << "]";
        throw usage_error(os.str());
      }
      out.push_back(v);
    }
    return out;
  }

  /// A comma-separated list of integers, each in [min, max].
  std::vector<std::int64_t> integers(const std::string& name, std::vector<std::int64_t> fallback,
                                     std::int64_t min, std::int64_t max) const {
    const auto it = values_.find(name);
    if (it == values_.end()) {
      return fallback;
    }
    std::vector<std::int64_t> out;
    std::stringstream ss(it->second);
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || errno == ERANGE || v < min || v > max) {
        throw usage_error("--" + name + " has '" + item + "', expected integers in [" +
                          std::to_string(min) + ", " + std::to_string(max) + "]");
      }
      out.push_back(v);
    }
    if (out.empty()) {
      throw usage_error("--" + name + " is empty");
    }
    return out;
  }

 private:
  static bool contains(const std::vector<std::string>& v, const std::string& s) {
    for (const auto& x : v) {
      if (x == s) {
        return true;
      }
    }
    return false;
  }

  std::map<std::string, std::string> values_;
  std::map<std::string, bool> flags_;
};

/// A tool's `main`: `run(argc, argv)`, with a usage error reported as `tool: message` and the
/// usage text (exit status 2), any other error as `tool: message` (exit status 1).
inline int guarded_main(const char* tool, const char* usage, int (*run)(int, char**), int argc,
                        char** argv) {
  try {
    return run(argc, argv);
  } catch (const usage_error& e) {
    std::cerr << tool << ": " << e.what() << "\n" << usage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << tool << ": " << e.what() << "\n";
    return 1;
  }
}

/// A JSON string literal, escaped.
inline std::string quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        std::ostringstream os;
        os << "\\u" << std::hex << std::setw(4) << std::setfill('0') << static_cast<int>(c);
        out += os.str();
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}

/// A JSON number: integers as they are, reals with enough digits to round-trip, non-finite as
/// null.
inline std::string number(double v) {
  if (!std::isfinite(v)) {
    return "null";
  }
  std::ostringstream os;
  os << std::setprecision(10) << v;
  return os.str();
}

} // namespace packswap::cli
