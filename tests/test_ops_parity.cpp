#define BOOST_TEST_MODULE ops_parity
// The ops of PyTorch parity II (and cross_entropy's options) against PyTorch in float64: outputs and the gradient of
// every input under PyTorch's upstream gradient must agree to 1e-13 relative. Fixtures
// from tests/reference/make_ops_fixtures.py (run by hand).
#include <functional>
#include <optional>

#include "fixtures.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {

const json& fixtures() {
  static const json cases = load_cases("ops_fixtures.json");
  return cases;
}

std::optional<double> optional_number(const json& args, const char* key) {
  if (!args.contains(key)) return std::nullopt;
  return args.at(key).get<double>();
}

// The xgrad call for a case's op and arguments.
Tensor call_op(const json& c, const std::vector<Tensor>& in) {
  const std::string op = c.at("op");
  const json& args = c.at("args");
  const auto axis = [&] { return args.at("axis").get<int>(); };
  const auto index = [&] { return indices_of(c.at("index")); };
  if (op == "silu") return silu(in[0]);
  if (op == "softplus") return softplus(in[0], args.at("beta"), args.at("threshold"));
  if (op == "clamp") return clamp(in[0], optional_number(args, "min"), optional_number(args, "max"));
  if (op == "minimum") return minimum(in[0], in[1]);
  if (op == "maximum") return maximum(in[0], in[1]);
  if (op == "sin") return sin(in[0]);
  if (op == "cos") return cos(in[0]);
  if (op == "erf") return erf(in[0]);
  if (op == "cumsum") return cumsum(in[0], axis());
  if (op == "var" || op == "std") {
    const int correction = args.at("correction");
    const bool keepdim = args.value("keepdim", false);
    if (!args.contains("axes")) return op == "var" ? var(in[0], correction) : stddev(in[0], correction);
    const auto axes = args.at("axes").get<std::vector<int>>();
    return op == "var" ? var(in[0], axes, correction, keepdim) : stddev(in[0], axes, correction, keepdim);
  }
  if (op == "gather") return gather(in[0], axis(), index());
  if (op == "index_select") return index_select(in[0], axis(), index());
  if (op == "pad") return pad(in[0], args.at("pads").get<std::vector<std::int64_t>>(), args.at("value"));
  if (op == "triu") return triu(in[0], args.at("diagonal"));
  if (op == "tril") return tril(in[0], args.at("diagonal"));
  if (op == "cross_entropy") {
    CrossEntropyOptions options;
    const std::string reduction = args.value("reduction", "mean");
    options.reduction = reduction == "none" ? Reduction::none : reduction == "sum" ? Reduction::sum : Reduction::mean;
    options.ignore_index = args.value("ignore_index", std::int64_t{-100});
    options.label_smoothing = args.value("label_smoothing", 0.0);
    options.class_axis = args.at("class_axis");
    if (args.contains("weight")) options.weight = tensor_of(args.at("weight"));
    return in.size() == 2 ? cross_entropy(in[0], in[1], options) : cross_entropy(in[0], index(), options);
  }
  throw std::runtime_error("no xgrad call for op " + op);
}

Indices apply_ids(const json& c, const Tensor& x) {
  const std::string op = c.at("op");
  const json& args = c.at("args");
  const bool max = op == "argmax";
  if (!args.contains("axis")) return max ? argmax(x) : argmin(x);
  const int axis = args.at("axis");
  const bool keepdim = args.value("keepdim", false);
  return max ? argmax(x, axis, keepdim) : argmin(x, axis, keepdim);
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_op_matches_torch) {
  std::size_t checked = 0;
  for (const auto& [name, c] : fixtures().items()) {
    BOOST_TEST_CONTEXT(name) {
      std::vector<Tensor> inputs;
      for (const json& input : c.at("inputs")) inputs.push_back(tensor_of(input, true));
      if (c.contains("ids")) {
        const Indices ids = apply_ids(c, inputs[0]);
        const Indices expected = indices_of(c.at("ids"));
        BOOST_CHECK(ids.shape == expected.shape);
        BOOST_CHECK(ids.values == expected.values);
        ++checked;
        continue;
      }
      const Tensor y = call_op(c, inputs);
      check_matches(name + " output", y, c.at("output"), 1e-13);
      y.backward(tensor_of(c.at("grad_output")));
      for (std::size_t i = 0; i < inputs.size(); ++i)
        check_matches(name + " grad of input " + std::to_string(i), inputs[i].grad(), c.at("grads").at(i), 1e-13);
      ++checked;
    }
  }
  BOOST_CHECK_EQUAL(checked, 49u);
}
