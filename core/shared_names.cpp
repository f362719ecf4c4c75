#include "core/shared_names.hpp"

#include <algorithm>

namespace mcprt {

void shared_names::const_iterator::skip() {
  while (i_ < all_->size() && ex_ != ex_end_) {
    auto& name = (*all_)[i_];
    if (*ex_ < name) {
      ++ex_;
    } else if (*ex_ == name) {
      ++ex_;
      ++i_;
    } else {
      return;
    }
  }
}

shared_names::shared_names(array names)
  : all_(std::make_shared<const array>(std::move(names))), size_(all_->size()) {
}

shared_names::shared_names(std::shared_ptr<const array> all, array except)
  : all_(std::move(all)), except_(std::move(except)) {
  if (!all_) all_ = std::make_shared<const array>();
  // Duplicates in `except` would be counted twice below.
  except_.erase(std::unique(except_.begin(), except_.end()), except_.end());
  size_ = all_->size();
  for (auto& name : except_)
    if (std::binary_search(all_->begin(), all_->end(), name)) --size_;
}

shared_names::const_iterator shared_names::begin() const {
  if (!all_) return {};
  return const_iterator(all_.get(), 0, except_.data(), except_.data() + except_.size());
}

shared_names::const_iterator shared_names::end() const {
  if (!all_) return {};
  return const_iterator(all_.get(), all_->size(), nullptr, nullptr);
}

shared_names::array shared_names::to_vector() const {
  array out;
  out.reserve(size_);
  out.insert(out.end(), begin(), end());
  return out;
}

bool operator==(const shared_names& a, const shared_names& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

bool operator==(const shared_names& a, const shared_names::array& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

std::ostream& operator<<(std::ostream& out, const shared_names& x) {
  out << '[';
  bool first = true;
  for (auto& name : x) {
    out << (first ? "" : ", ") << '"' << name << '"';
    first = false;
  }
  return out << ']';
}

} // namespace mcprt
