#include "xgrad/autograd/gradcheck.hpp"

#include <cmath>
#include <sstream>

#include "xgrad/autograd/random.hpp"

namespace xgrad {

namespace {

// "[1, 2]": the multi-index of a flat row-major position.
std::string index_str(std::size_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return str(index);
}

// Gradients of the checked inputs after one backward of `out` seeded with `seed`
// (an input that the output does not depend on gets zeros).
std::vector<std::vector<double>> input_grads(const Tensor& out, const Tensor& seed, std::vector<Tensor>& xs,
                                             const std::vector<std::size_t>& checked) {
  for (Tensor& x : xs) x.zero_grad();
  if (out.requires_grad()) out.backward(seed, /*retain_graph=*/true);
  std::vector<std::vector<double>> grads;
  for (std::size_t i : checked) {
    const Tensor g = xs[i].grad();
    grads.push_back(g.defined() ? g.to_vector() : std::vector<double>(xs[i].numel(), 0.0));
  }
  return grads;
}

}  // namespace

bool gradcheck(const TensorFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  // Private float64 copies, so the caller's tensors are never touched.
  std::vector<Tensor> copies;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    XGRAD_CHECK(inputs[i].defined(), "gradcheck", "input ", i, " is undefined");
    copies.push_back(inputs[i].detach().to(DType::float64).clone().requires_grad_(inputs[i].requires_grad()));
  }
  return gradcheck_in_place(f, copies, options);
}

bool gradcheck_in_place(const TensorFunction& f, const std::vector<Tensor>& tensors, const GradcheckOptions& options) {
  const auto failed = [&](const std::string& message) {
    if (options.raise) throw GradcheckError(str("gradcheck: ", message));
    return false;
  };
  const auto input_name = [&](std::size_t i) {
    return i < options.input_names.size() ? str("'", options.input_names[i], "'") : str(i);
  };
  std::vector<Tensor> xs = tensors;
  std::vector<std::size_t> checked;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    XGRAD_CHECK(xs[i].defined() && xs[i].dtype() == DType::float64 && xs[i].is_leaf(), "gradcheck", "input ", i,
                " must be a defined float64 leaf");
    if (xs[i].requires_grad()) checked.push_back(i);
  }
  XGRAD_CHECK(!checked.empty(), "gradcheck", "no input has requires_grad set");

  const Tensor out = f(xs);
  XGRAD_CHECK(out.defined(), "gradcheck", "the function returned an undefined tensor");
  XGRAD_CHECK(out.dtype() == DType::float64, "gradcheck",
              "the function returned float32; make every tensor it creates in its "
              "inputs' dtype so the check runs in float64");
  const Shape out_shape = out.shape();
  const std::size_t n_out = out.numel();

  // Analytic Jacobian, one backward per output element: analytic[c][o * n_in + e].
  std::vector<std::vector<double>> analytic(checked.size());
  for (std::size_t c = 0; c < checked.size(); ++c) analytic[c].resize(n_out * xs[checked[c]].numel());
  for (std::size_t o = 0; o < n_out; ++o) {
    Tensor seed = Tensor::zeros(out_shape, DType::float64);
    seed.data<double>()[o] = 1.0;
    const auto grads = input_grads(out, seed, xs, checked);
    for (std::size_t c = 0; c < checked.size(); ++c)
      std::copy(grads[c].begin(), grads[c].end(), analytic[c].begin() + o * grads[c].size());
  }

  // Numeric Jacobian, one central difference per input element, compared as we go.
  {
    NoGradGuard no_grad;
    for (std::size_t c = 0; c < checked.size(); ++c) {
      Tensor& x = xs[checked[c]];
      const std::size_t n_in = x.numel();
      double* data = x.data<double>();
      for (std::size_t e = 0; e < n_in; ++e) {
        const double original = data[e];
        data[e] = original + options.eps;
        const std::vector<double> plus = f(xs).to_vector();
        data[e] = original - options.eps;
        const std::vector<double> minus = f(xs).to_vector();
        data[e] = original;
        for (std::size_t o = 0; o < n_out; ++o) {
          const double numeric = (plus[o] - minus[o]) / (2.0 * options.eps);
          const double exact = analytic[c][o * n_in + e];
          if (!(std::abs(exact - numeric) <= options.atol + options.rtol * std::abs(numeric))) {
            std::ostringstream report;
            report.precision(10);
            report << "Jacobian mismatch for input " << input_name(checked[c]) << " (shape " << shape_str(x.shape())
                   << ") at element " << index_str(e, x.shape()) << ", output element " << index_str(o, out_shape)
                   << ": analytic " << exact << ", numeric " << numeric << " (atol " << options.atol << ", rtol "
                   << options.rtol << ")";
            return failed(report.str());
          }
        }
      }
    }
  }

  if (!options.check_zero_grad && !options.check_repeat) return true;
  const Tensor fresh = f(xs);
  if (options.check_zero_grad) {
    const auto grads = input_grads(fresh, Tensor::zeros(out_shape, DType::float64), xs, checked);
    for (std::size_t c = 0; c < checked.size(); ++c)
      for (std::size_t e = 0; e < grads[c].size(); ++e)
        if (grads[c][e] != 0.0)
          return failed(str("a zero output gradient gave input ", input_name(checked[c]), " a gradient of ",
                            grads[c][e], " at element ", index_str(e, xs[checked[c]].shape())));
  }
  if (options.check_repeat) {
    Generator gen(0x9e3779b9);
    const Tensor seed = Tensor::randn(out_shape, gen, DType::float64);
    const auto first = input_grads(fresh, seed, xs, checked);
    const auto second = input_grads(fresh, seed, xs, checked);
    for (std::size_t c = 0; c < checked.size(); ++c)
      for (std::size_t e = 0; e < first[c].size(); ++e)
        if (first[c][e] != second[c][e])
          return failed(str("two backward passes through the same graph disagree for input ", input_name(checked[c]),
                            " at element ", index_str(e, xs[checked[c]].shape()), ": ", first[c][e], " then ",
                            second[c][e]));
  }
  return true;
}

}  // namespace xgrad
