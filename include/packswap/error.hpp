#pragma once

#include <cstddef>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

namespace packswap {

/// What went wrong, stable across releases; every `packswap::error` carries one.
enum class errc {
  invalid_argument = 1, ///< a parameter or an input record is out of its documented range
  parse_error, ///< a CSV or command-line text could not be read (the message names the line)
  overflow,    ///< an integer sum or product would leave `std::int64_t`
  transport,   ///< a transport backend reported a failure
  timeout,     ///< an exchange did not complete within its deadline
  mismatch,    ///< ranks disagree (metadata or plan digests differ) or data arrived corrupted
  cancelled,   ///< work was abandoned because the engine was shut down or failed earlier
  cuda,        ///< a CUDA runtime call failed (only from `packswap/nccl/`)
  nccl,        ///< an NCCL call failed (only from `packswap/nccl/`)
  internal,    ///< a packswap invariant did not hold: a bug, please report it
};

/// The stable name of an error code, e.g. `"invalid_argument"`.
[[nodiscard]] constexpr const char* to_string(errc code) noexcept {
  switch (code) {
  case errc::invalid_argument:
    return "invalid_argument";
  case errc::parse_error:
    return "parse_error";
  case errc::overflow:
    return "overflow";
  case errc::transport:
    return "transport";
  case errc::timeout:
    return "timeout";
  case errc::mismatch:
    return "mismatch";
  case errc::cancelled:
    return "cancelled";
  case errc::cuda:
    return "cuda";
  case errc::nccl:
    return "nccl";
  case errc::internal:
    return "internal";
  }
  return "unknown";
}

/// The one exception type packswap throws (CUDA and NCCL errors derive from it).
///
/// `what()` reads `packswap [<code>]: <message>`, where the message names the offending item and
/// its values, e.g. `packswap [invalid_argument]: sample 17 has 9001 tokens, capacity is 8192`.
/// Copies share the text, so copying never throws.
class error : public std::runtime_error {
 public:
  /// An error with code `code`; `message` names what was wrong, with its values.
  error(errc code, const std::string& message)
      : std::runtime_error(std::string()), code_(code),
        text_(std::make_shared<const std::string>(prefix(code) + message)),
        message_at_(prefix(code).size()) {}

  /// The error code; stable, unlike the message text.
  [[nodiscard]] errc code() const noexcept { return code_; }

  /// `packswap [<code>]: <message>`.
  const char* what() const noexcept override { return text_->c_str(); }

  /// The message alone, without the `packswap [<code>]: ` prefix.
  const char* message() const noexcept { return text_->c_str() + message_at_; }

  /// Puts `context: ` in front of the message and keeps the code and the dynamic type: for code
  /// that catches an error by reference to say where it happened and rethrows it with `throw;`.
  ///
  /// ```
  /// try { t.wait(req, until); }
  /// catch (packswap::error& e) { e.add_context("rank 3, batch 7"); throw; }
  /// ```
  void add_context(const std::string& context) {
    text_ = std::make_shared<const std::string>(prefix(code_) + context + ": " + message());
  }

 private:
  static std::string prefix(errc code) {
    return "packswap [" + std::string(to_string(code)) + "]: ";
  }

  errc code_;
  std::shared_ptr<const std::string> text_;
  std::size_t message_at_;
};

namespace detail {

[[noreturn]] inline void throw_error(errc code, const std::string& message) {
  throw error(code, message);
}

} // namespace detail
} // namespace packswap

/// Throws `packswap::error(code, message)` unless `cond` holds. The message is a stream
/// expression, evaluated only on failure: `PACKSWAP_EXPECTS(n > 0, errc::invalid_argument,
/// "dp is " << n << ", must be at least 1");`
#define PACKSWAP_EXPECTS(cond, code, ...)                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::ostringstream packswap_msg_;                                                            \
      packswap_msg_ << __VA_ARGS__;                                                                \
      ::packswap::detail::throw_error((code), packswap_msg_.str());                                \
    }                                                                                              \
  } while (false)

/// Throws `packswap::error(code, message)` unconditionally; the message is a stream expression.
#define PACKSWAP_FAIL(code, ...)                                                                   \
  do {                                                                                             \
    std::ostringstream packswap_msg_;                                                              \
    packswap_msg_ << __VA_ARGS__;                                                                  \
    ::packswap::detail::throw_error((code), packswap_msg_.str());                                  \
  } while (false)
