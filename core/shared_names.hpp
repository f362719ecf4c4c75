#pragma once

#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace mcprt {

/// A sorted list of names read from a shared, immutable sorted array, less
/// the names in `except`. A pass that keeps 9,999 of 10,000 servers hands
/// its event the session's array of live names and the one it touched: no
/// 320 KB copy, no allocation that large on the pass's path. A list built
/// from a plain vector owns it alone.
class shared_names {
public:
  using array = std::vector<std::string>;
  using value_type = std::string;
  using size_type = std::size_t;

  class const_iterator {
  public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::string;
    using difference_type = std::ptrdiff_t;
    using pointer = const std::string*;
    using reference = const std::string&;

    const_iterator() = default;
    reference operator*() const { return (*all_)[i_]; }
    pointer operator->() const { return &(*all_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      skip();
      return *this;
    }
    const_iterator operator++(int) {
      auto before = *this;
      ++*this;
      return before;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) { return a.i_ == b.i_; }
    friend bool operator!=(const const_iterator& a, const const_iterator& b) { return a.i_ != b.i_; }

  private:
    friend class shared_names;
    const_iterator(const array* all, std::size_t i, const std::string* ex, const std::string* ex_end)
      : all_(all), i_(i), ex_(ex), ex_end_(ex_end) {
      skip();
    }
    /// Both lists are sorted: one merge step past every excepted name.
    void skip();

    const array* all_ = nullptr;
    std::size_t i_ = 0;
    const std::string* ex_ = nullptr;
    const std::string* ex_end_ = nullptr;
  };
  using iterator = const_iterator;

  shared_names() = default;
  /// Owns `names` (sorted or not: they are listed as given).
  shared_names(array names); // NOLINT: a plain list is a list of names
  shared_names(std::initializer_list<std::string> names) : shared_names(array(names)) {}
  /// `all` and `except` sorted; names of `except` not in `all` are ignored.
  shared_names(std::shared_ptr<const array> all, array except);
  shared_names(const shared_names&) = default;
  shared_names& operator=(const shared_names&) = default;
  /// A moved-from list is empty, in its size as in its names.
  shared_names(shared_names&& other) noexcept
    : all_(std::move(other.all_)), except_(std::move(other.except_)), size_(other.size_) {
    other.except_.clear();
    other.size_ = 0;
  }
  shared_names& operator=(shared_names&& other) noexcept {
    if (this == &other) return *this;
    all_ = std::move(other.all_);
    except_ = std::move(other.except_);
    size_ = other.size_;
    other.except_.clear();
    other.size_ = 0;
    return *this;
  }

  const_iterator begin() const;
  const_iterator end() const;
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  array to_vector() const;

  friend bool operator==(const shared_names& a, const shared_names& b);
  friend bool operator!=(const shared_names& a, const shared_names& b) { return !(a == b); }
  friend bool operator==(const shared_names& a, const array& b);
  friend bool operator==(const array& a, const shared_names& b) { return b == a; }

private:
  std::shared_ptr<const array> all_;
  array except_;
  std::size_t size_ = 0;
};

std::ostream& operator<<(std::ostream& out, const shared_names& x);

} // namespace mcprt
