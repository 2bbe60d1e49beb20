#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

namespace packswap {

/// A non-owning view of `size()` contiguous `T`s: the C++17 stand-in for `std::span<T>`.
///
/// It never owns what it points to; the caller keeps the underlying storage alive and unchanged
/// for as long as the view is used. Converts implicitly from `std::vector` and from a
/// `span<U>` where `U*` converts to `T*` (so `span<int>` -> `span<const int>`).
template <class T>
class span {
 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using iterator = T*;

  constexpr span() noexcept = default;
  constexpr span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}

  template <class U, class A,
            class = std::enable_if_t<std::is_convertible_v<const U (*)[], T (*)[]>>>
  span(const std::vector<U, A>& v) noexcept : data_(v.data()), size_(v.size()) {}

  template <class U, class A, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  span(std::vector<U, A>& v) noexcept : data_(v.data()), size_(v.size()) {}

  template <class U, class = std::enable_if_t<!std::is_same_v<U, T> &&
                                              std::is_convertible_v<U (*)[], T (*)[]>>>
  constexpr span(span<U> other) noexcept : data_(other.data()), size_(other.size()) {}

  constexpr T* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }
  constexpr T* begin() const noexcept { return data_; }
  constexpr T* end() const noexcept { return data_ + size_; }
  constexpr T& front() const noexcept { return data_[0]; }
  constexpr T& back() const noexcept { return data_[size_ - 1]; }
  constexpr span subspan(std::size_t offset, std::size_t count) const noexcept {
    return span(data_ + offset, count);
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

} // namespace packswap
