// A tensor's shape: up to Shape::max_dims dims held inline, so making, copying
// and viewing a tensor allocates nothing (Note [Tensor is a small handle] in
// tensor.h). It reads like the std::vector<std::int64_t> it replaces.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

namespace zrt {

class Shape {
 public:
  static constexpr int max_dims = 6;
  using value_type = std::int64_t;
  using iterator = std::int64_t*;
  using const_iterator = const std::int64_t*;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.end()); }
  Shape(const std::vector<std::int64_t>& dims) {
    assign(dims.begin(), dims.end());
  }  // NOLINT: implicit
  template <class It>
  Shape(It first, It last) {
    assign(first, last);
  }

  std::size_t size() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  std::int64_t& operator[](std::size_t i) { return dims_[i]; }
  std::int64_t operator[](std::size_t i) const { return dims_[i]; }
  std::int64_t* data() { return dims_; }
  const std::int64_t* data() const { return dims_; }
  iterator begin() { return dims_; }
  iterator end() { return dims_ + rank_; }
  const_iterator begin() const { return dims_; }
  const_iterator end() const { return dims_ + rank_; }
  std::int64_t& front() { return dims_[0]; }
  std::int64_t& back() { return dims_[rank_ - 1]; }
  std::int64_t front() const { return dims_[0]; }
  std::int64_t back() const { return dims_[rank_ - 1]; }
  // Throws InvalidArgument past max_dims.
  void push_back(std::int64_t d);

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  template <class It>
  void assign(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }

  std::int64_t dims_[max_dims] = {};
  std::uint8_t rank_ = 0;
};

std::string shape_str(const Shape& shape);
std::ostream& operator<<(std::ostream& os, const Shape& shape);  // as shape_str
// Product of dims; throws InvalidArgument for a negative dim or overflow.
std::int64_t shape_numel(const Shape& shape);

}  // namespace zrt
