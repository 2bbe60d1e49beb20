#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

namespace packswap {

/// A non-owning view of `size()` contiguous `T`s: the C++17 stand-in for `std::span<T>`, and the
/// type every packswap function takes its arrays as (costs, pack records, sample ids).
///
/// It never owns what it points to: the caller keeps the underlying storage alive and unchanged
/// for as long as the view is used. It converts implicitly from a `std::vector`, from a pointer
/// and a length (`{data, size}`), and from a `span<U>` where `U*` converts to `T*` (so
/// `span<int>` -> `span<const int>`). Copying a span copies the view, never the elements.
///
/// ```
/// std::vector<std::int64_t> costs = {900, 200, 450, 300};
/// auto a = packswap::balance(costs, packswap::shape{2, 2});   // the vector converts
/// packswap::span<const std::int64_t> first_two(costs.data(), 2);
/// ```
template <class T>
class span {
 public:
  using element_type = T;                 ///< `T`, with its `const` if any
  using value_type = std::remove_cv_t<T>; ///< `T` without `const` / `volatile`
  using iterator = T*;                    ///< a plain pointer into the viewed array

  /// The empty view: no elements, `data() == nullptr`.
  constexpr span() noexcept = default;
  /// The `size` elements starting at `data` (which may be null only when `size` is 0).
  constexpr span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}

  /// Every element of `v`, read-only (`T` must be `const`-qualified for a `const` vector).
  template <class U, class A,
            class = std::enable_if_t<std::is_convertible_v<const U (*)[], T (*)[]>>>
  span(const std::vector<U, A>& v) noexcept : data_(v.data()), size_(v.size()) {}

  /// Every element of `v`. The view is invalidated by anything that reallocates `v`.
  template <class U, class A, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  span(std::vector<U, A>& v) noexcept : data_(v.data()), size_(v.size()) {}

  /// The same elements as `other`, e.g. a `span<const T>` from a `span<T>`.
  template <class U, class = std::enable_if_t<!std::is_same_v<U, T> &&
                                              std::is_convertible_v<U (*)[], T (*)[]>>>
  constexpr span(span<U> other) noexcept : data_(other.data()), size_(other.size()) {}

  /// The first element's address (null for a default-constructed span).
  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  /// The number of elements.
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  /// Whether `size() == 0`.
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }
  /// Element `i`; `i < size()` is the caller's to ensure (unchecked).
  [[nodiscard]] constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }
  /// An iterator to the first element.
  [[nodiscard]] constexpr T* begin() const noexcept { return data_; }
  /// An iterator past the last element.
  [[nodiscard]] constexpr T* end() const noexcept { return data_ + size_; }
  /// The first element; requires `!empty()`.
  [[nodiscard]] constexpr T& front() const noexcept { return data_[0]; }
  /// The last element; requires `!empty()`.
  [[nodiscard]] constexpr T& back() const noexcept { return data_[size_ - 1]; }
  /// The `count` elements starting at `offset`; requires `offset + count <= size()`.
  [[nodiscard]] constexpr span subspan(std::size_t offset, std::size_t count) const noexcept {
    return span(data_ + offset, count);
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

} // namespace packswap
