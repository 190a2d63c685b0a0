#pragma once
// Reading the PyTorch fixtures in tests/reference/ (JSON written by the scripts there):
// tensors are {"shape": [...], "values": [...]}, row-major, float64.

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "helpers.hpp"

namespace xgrad::test {

using json = nlohmann::json;

// The whole of tests/reference/<file>, and just its "cases" object.
inline json load_fixture(const std::string& file) {
  const std::string path = std::string(XGRAD_REFERENCE_DIR) + "/" + file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return json::parse(in);
}

inline json load_cases(const std::string& file) { return load_fixture(file).at("cases"); }

// Values are numbers, or the strings "inf" / "-inf" (JSON has no infinities).
inline Tensor tensor_of(const json& j, bool requires_grad = false) {
  std::vector<double> values;
  for (const json& v : j.at("values"))
    values.push_back(v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>());
  return Tensor::from_vector(values, j.at("shape").get<Shape>(), DType::float64, requires_grad);
}

inline Indices indices_of(const json& j) {
  return Indices(j.at("values").get<std::vector<std::int64_t>>(), j.at("shape").get<Shape>());
}

// Every element within rtol * |expected| + 1e-12, as numpy.allclose. The absolute term
// is float64 rounding noise: some gradients are exactly zero in theory (the key
// projection's bias cannot change a softmax row), and both sides then hold ~1e-15 noise
// that no relative tolerance can compare.
inline void check_matches(const std::string& what, const Tensor& actual, const json& expected, double rtol) {
  BOOST_REQUIRE_MESSAGE(actual.defined(), what << " is undefined");
  BOOST_REQUIRE_MESSAGE(actual.shape() == expected.at("shape").get<Shape>(),
                        what << ": shape " << shape_str(actual.shape()));
  const auto a = actual.to_vector();
  const auto e = expected.at("values").get<std::vector<double>>();
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - e[i]) <= rtol * std::abs(e[i]) + 1e-12)) {
      BOOST_ERROR(what << ": element " << i << " is " << a[i] << ", PyTorch has " << e[i] << " (rtol " << rtol << ")");
      return;
    }
  BOOST_CHECK(true);
}

}  // namespace xgrad::test
