#pragma once
// How xgrad reports bad input: an Error whose message starts with the op's name, then
// the facts that make the input wrong, e.g. "matmul: inner dimensions differ: [2, 3] and [4, 5]".
//
//   XGRAD_CHECK(condition, op, parts...)  throws when condition is false; the parts are
//                                          streamed into the message only then.
//   fail(op, parts...)                     throws unconditionally.
//   str(parts...)                          the same text as a string, for messages built
//                                          in steps.
//
// Parts are streamed with <<, except a vector of numbers (a Shape, written "[2, 3]"), a
// DType (by name) and floating-point numbers (the shortest text that reads back exactly,
// "1.0" not "1").
// Custom layers and ops use the same two to report their own bad input.

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "xgrad/autograd/dtype.hpp"

namespace xgrad {

// Every error xgrad raises for bad input; the message starts with the op's name.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

std::string number_str(double value);
std::string number_str(float value);

inline void write_part(std::ostream& os, DType dtype) { os << dtype_name(dtype); }
template <class Part>
void write_part(std::ostream& os, const Part& part) {
  if constexpr (std::is_floating_point_v<Part>)
    os << number_str(part);
  else
    os << part;
}
template <class Number>
void write_part(std::ostream& os, const std::vector<Number>& numbers) {
  os << '[';
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    if (i) os << ", ";
    write_part(os, numbers[i]);
  }
  os << ']';
}

}  // namespace detail

template <class... Parts>
std::string str(const Parts&... parts) {
  std::ostringstream text;
  (detail::write_part(text, parts), ...);
  return text.str();
}

template <class... Parts>
[[noreturn]] void fail(std::string_view op, const Parts&... parts) {
  throw Error(str(op, ": ", parts...));
}

#define XGRAD_CHECK(condition, op, ...)             \
  do {                                              \
    if (!(condition)) [[unlikely]]                  \
      ::xgrad::fail(op __VA_OPT__(, ) __VA_ARGS__); \
  } while (false)

// "a, b, c and 99,997 more": a list for a message, at most `shown` items long, so that
// an error about 100,000 names stays one readable line.
std::string listed(const std::vector<std::string>& items, const char* separator = ", ", std::size_t shown = 10);

// Resolves a possibly negative axis against `ndim` dimensions (shape is for the message).
std::size_t normalize_axis(std::string_view op, int axis, std::size_t ndim, const std::vector<std::size_t>& shape);

}  // namespace xgrad
