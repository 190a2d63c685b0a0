#include "xgrad/autograd/error.hpp"

#include <charconv>
#include <cmath>

namespace xgrad {

namespace detail {

namespace {

template <class T>
std::string shortest(T value) {
  char text[64];
  const auto written = std::to_chars(text, text + sizeof text, value);
  std::string s(text, written.ptr);
  if (std::isfinite(value) && s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string number_str(double value) { return shortest(value); }
std::string number_str(float value) { return shortest(value); }

}  // namespace detail

std::string listed(const std::vector<std::string>& items, const char* separator, std::size_t shown) {
  std::string text;
  for (std::size_t i = 0; i < items.size() && i < shown; ++i) text += (i ? separator : "") + items[i];
  if (items.size() > shown) text += str(" and ", items.size() - shown, " more");
  return text;
}

std::size_t normalize_axis(std::string_view op, int axis, std::size_t ndim, const std::vector<std::size_t>& shape) {
  const int n = static_cast<int>(ndim);
  XGRAD_CHECK(axis >= -n && axis < n, op, "axis ", axis, " is out of range for shape ", shape);
  return static_cast<std::size_t>(axis < 0 ? axis + n : axis);
}

}  // namespace xgrad
