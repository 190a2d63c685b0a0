#define BOOST_TEST_MODULE linalg
#include "helpers.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>

#include "xgrad/autograd/detail/blas.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

namespace {

// Plain triple loop over the last two axes, batch axes already equal.
std::vector<double> naive_matmul(const std::vector<double>& a, const std::vector<double>& b, std::size_t batch,
                                 std::size_t n, std::size_t k, std::size_t m) {
  std::vector<double> c(batch * n * m, 0.0);
  for (std::size_t z = 0; z < batch; ++z)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j)
        for (std::size_t p = 0; p < k; ++p) c[(z * n + i) * m + j] += a[(z * n + i) * k + p] * b[(z * k + p) * m + j];
  return c;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Sets (or, with nullopt, unsets) OPENBLAS_CORETYPE for a scope, and then puts back the
// variable, the kernels and the start-up check's note as they were.
class CoreTypeVariable {
 public:
  explicit CoreTypeVariable(const std::optional<std::string>& value) {
    if (const char* user = std::getenv(kName)) saved_ = user;
    if (value)
      setenv(kName, value->c_str(), 1);
    else
      unsetenv(kName);
  }
  ~CoreTypeVariable() {
    if (saved_)
      setenv(kName, saved_->c_str(), 1);
    else
      unsetenv(kName);
    detail::force_blas_core(core_);
    detail::select_blas_kernels();
  }
  CoreTypeVariable(const CoreTypeVariable&) = delete;
  CoreTypeVariable& operator=(const CoreTypeVariable&) = delete;

 private:
  static constexpr const char* kName = "OPENBLAS_CORETYPE";
  std::optional<std::string> saved_;
  std::string core_ = blas_core();
};

}  // namespace

// Without OPENBLAS_CORETYPE, OpenBLAS must run the kernels of the CPU's vector class
// (AVX-512: SkylakeX class; AVX2: Haswell or Zen class), whether it recognised the CPU
// itself or xgrad corrected it. With it, the user's kernels run, and the summary says so.
BOOST_AUTO_TEST_CASE(blas_runs_the_cpus_best_kernels_or_the_users) {
  BOOST_TEST_MESSAGE("BLAS: " << blas_summary() << "; CPU class " << cpu_vector_class());
  if (const char* expected = std::getenv("XGRAD_EXPECTED_BLAS_CORE"))  // tests/with_blas_kernels.sh
    BOOST_TEST_REQUIRE(blas_core() == expected, blas_summary());
  const char* variable = std::getenv("OPENBLAS_CORETYPE");
  const char* user = variable && *variable ? variable : nullptr;  // set but empty is unset
  if (user && lower(user) == lower(blas_core())) {
    BOOST_TEST(blas_core_chosen_by() == "user");
    BOOST_TEST(blas_summary().find(blas_core() + " kernels (OPENBLAS_CORETYPE set by the user)") != std::string::npos,
               blas_summary());
  } else {
    BOOST_TEST(blas_core_fits_cpu(blas_core()),
               "OpenBLAS runs " << blas_core() << " kernels on a " << cpu_vector_class() << " CPU");
    BOOST_TEST(blas_core_chosen_by() != "user");
    if (user)  // a name OpenBLAS does not know: said
      BOOST_TEST(blas_summary().find("is not a kernel family OpenBLAS knows") != std::string::npos, blas_summary());
  }
  BOOST_TEST(blas_threads_per_call() == 1);  // xgrad's pool splits the products
}

// What happens on a CPU that OpenBLAS does not know: it falls back to Prescott (SSE3).
// The start-up check must replace those kernels, and products stay right. (Checked with
// OPENBLAS_CORETYPE unset for the test, whatever the environment holds.)
BOOST_AUTO_TEST_CASE(kernels_below_the_cpu_are_replaced) {
  if (cpu_vector_class() == "baseline") return;  // nothing better to choose
  const CoreTypeVariable unset(std::nullopt);
  BOOST_REQUIRE(detail::force_blas_core("Prescott"));
  BOOST_TEST(!blas_core_fits_cpu(blas_core()));
  const std::string note = detail::select_blas_kernels();
  BOOST_TEST(note == "chosen by xgrad: OpenBLAS picked Prescott");
  BOOST_TEST(blas_core_chosen_by() == "xgrad");
  BOOST_TEST(blas_core_fits_cpu(blas_core()), blas_core());
  const Tensor a = randn64({70, 40}, 1), b = randn64({40, 30}, 2);
  check_close(matmul(a, b).to_vector(), naive_matmul(a.to_vector(), b.to_vector(), 1, 70, 40, 30), 1e-12);
  BOOST_TEST(blas_core_fits_cpu("SkylakeX") == (cpu_vector_class() != "baseline"));
  BOOST_TEST(!blas_core_fits_cpu("Prescott"));
}

// A user's OPENBLAS_CORETYPE is kept even below the CPU's class, and said; a name that
// OpenBLAS does not know is said too, and the CPU's check applies as without it.
BOOST_AUTO_TEST_CASE(a_users_kernels_are_kept) {
  {
    const CoreTypeVariable user("Prescott");
    BOOST_REQUIRE(detail::force_blas_core("Prescott"));  // as if OpenBLAS had been loaded with it
    BOOST_TEST(detail::select_blas_kernels() == "OPENBLAS_CORETYPE set by the user");
    BOOST_TEST(blas_core() == "Prescott");
    BOOST_TEST(blas_core_chosen_by() == "user");
    BOOST_TEST(blas_summary().find("Prescott kernels (OPENBLAS_CORETYPE set by the user)") != std::string::npos,
               blas_summary());
    const Tensor a = randn64({70, 40}, 1), b = randn64({40, 30}, 2);
    check_close(matmul(a, b).to_vector(), naive_matmul(a.to_vector(), b.to_vector(), 1, 70, 40, 30), 1e-12);
  }
  if (cpu_vector_class() == "baseline") return;
  const CoreTypeVariable unknown("NoSuchKernels");
  BOOST_REQUIRE(detail::force_blas_core("Prescott"));  // an unknown CPU, and a name OpenBLAS ignored
  const std::string note = detail::select_blas_kernels();
  BOOST_TEST(note ==
                 "OPENBLAS_CORETYPE=NoSuchKernels set by the user is not a kernel family OpenBLAS knows; "
                 "chosen by xgrad: OpenBLAS picked Prescott",
             note);
  BOOST_TEST(blas_core_fits_cpu(blas_core()), blas_core());
}

// Products large enough to be split over the pool (by rows, by columns, several panels
// of each, and along k when it dominates), in every layout: the same values as the plain
// loop, and bitwise the same on any thread count (the cut depends on the shapes alone).
BOOST_AUTO_TEST_CASE(split_products_match_and_repeat) {
  const int threads = num_threads();
  const std::vector<std::array<std::size_t, 3>> shapes{{300, 120, 90}, {70, 150, 410}, {33, 700, 129},
                                                       {40, 1200, 50}, {2100, 64, 64}, {40, 64, 2100}};
  std::vector<std::vector<double>> on_one_thread, on_one_thread_f32;  // float32 -> double is exact
  for (const int t : {1, 2, 3, 8}) {
    set_num_threads(t);
    for (std::size_t s = 0; s < shapes.size(); ++s) {
      const auto [n, k, m] = shapes[s];
      const Tensor a = randn64({n, k}, 3), b = randn64({k, m}, 4);
      const std::vector<double> expected = naive_matmul(a.to_vector(), b.to_vector(), 1, n, k, m);
      const Tensor c = matmul(a, b);
      check_close(c.to_vector(), expected, 1e-12);
      check_close(matmul(transpose(a, 0, 1), b, true, false).to_vector(), expected, 1e-12);
      check_close(matmul(a, transpose(b, 0, 1), false, true).to_vector(), expected, 1e-12);
      check_close(matmul(transpose(a, 0, 1), transpose(b, 0, 1), true, true).to_vector(), expected, 1e-12);
      const Tensor af = a.to(DType::float32), bf = b.to(DType::float32);
      const std::vector<double> cf = matmul(af, bf).to_vector();
      if (t == 1) {
        on_one_thread.push_back(c.to_vector());
        on_one_thread_f32.push_back(cf);
      } else {
        BOOST_TEST((c.to_vector() == on_one_thread[s]), n << " x " << k << " x " << m << " on " << t << " threads");
        BOOST_TEST((cf == on_one_thread_f32[s]), n << " x " << k << " x " << m << " (float32) on " << t << " threads");
      }
    }
  }
  set_num_threads(threads);
}

BOOST_AUTO_TEST_CASE(matmul_values) {
  const Tensor a = randn64({2, 3, 4}, 1), b = randn64({2, 4, 5}, 2);
  const Tensor c = matmul(a, b);
  BOOST_CHECK(c.shape() == (Shape{2, 3, 5}));
  check_close(c.to_vector(), naive_matmul(a.to_vector(), b.to_vector(), 2, 3, 4, 5), 1e-12);
  // Transposed operands are read in place and give the same product.
  check_close(matmul(transpose(a, -1, -2), b, true, false).to_vector(), c.to_vector(), 1e-12);
  check_close(matmul(a, transpose(b, -1, -2), false, true).to_vector(), c.to_vector(), 1e-12);
  check_close(matmul(transpose(a, -1, -2), transpose(b, -1, -2), true, true).to_vector(), c.to_vector(), 1e-12);
}

BOOST_AUTO_TEST_CASE(matmul_gradients_2d_and_batched) {
  check_gradients([](const Inputs& in) { return matmul(in[0], in[1]); }, {randn64({3, 4}, 3), randn64({4, 2}, 4)});
  check_gradients([](const Inputs& in) { return matmul(in[0], in[1]); },
                  {randn64({2, 3, 4}, 5), randn64({2, 4, 2}, 6)});
  // A stack times one matrix (the Linear layer's case, batches folded into rows).
  check_gradients([](const Inputs& in) { return matmul(in[0], in[1]); }, {randn64({2, 3, 4}, 7), randn64({4, 5}, 8)});
  check_gradients([](const Inputs& in) { return matmul(in[0], in[1], false, true); },
                  {randn64({2, 3, 4}, 7), randn64({5, 4}, 8)});
}

BOOST_AUTO_TEST_CASE(matmul_gradients_with_broadcast_batch) {
  // [2, 1, 3, 4] x [3, 4, 2] -> [2, 3, 3, 2]: both sides broadcast their batch axes.
  const Tensor a = randn64({2, 1, 3, 4}, 9), b = randn64({3, 4, 2}, 10);
  BOOST_CHECK(matmul(a, b).shape() == (Shape{2, 3, 3, 2}));
  check_gradients([](const Inputs& in) { return matmul(in[0], in[1]); }, {a, b});
  // One matrix on the left, a stack on the right.
  check_gradients([](const Inputs& in) { return matmul(in[0], in[1]); }, {randn64({3, 4}, 11), randn64({2, 4, 2}, 12)});
}

BOOST_AUTO_TEST_CASE(matmul_gradients_with_transposes) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor a = ta ? randn64({2, 4, 3}, 13) : randn64({2, 3, 4}, 13);
      const Tensor b = tb ? randn64({1, 5, 4}, 14) : randn64({1, 4, 5}, 14);
      BOOST_CHECK(matmul(a, b, ta, tb).shape() == (Shape{2, 3, 5}));
      check_gradients([ta, tb](const Inputs& in) { return matmul(in[0], in[1], ta, tb); }, {a, b});
    }
}

// A first gradient is written by its one product (no zero fill), later ones are added to
// it: an operand of two products, then a second backward; a batch whose slices add into
// one broadcast operand's gradient. Each against the sum of the products' own gradients.
BOOST_AUTO_TEST_CASE(matmul_gradients_are_written_then_added_to) {
  for (DType dtype : {DType::float64, DType::float32}) {
    const double tol = dtype == DType::float64 ? 1e-12 : 1e-5;
    Tensor a = randn64({3, 4}, 30).detach().to(dtype).requires_grad_();
    Tensor b = randn64({4, 5}, 31).detach().to(dtype).requires_grad_();
    const Tensor b2 = randn64({4, 5}, 32, false).to(dtype), seed = randn64({3, 5}, 33, false).to(dtype);
    sum(mul(add(matmul(a, b), matmul(a, b2)), seed)).backward();
    // d/da of sum((a b + a b2) o seed) = seed (b + b2)^T; d/db = a^T seed.
    const Tensor expected_a = matmul(seed, add(b, b2).detach(), false, true).detach();
    const Tensor expected_b = matmul(a.detach(), seed, true, false);
    check_close(a.grad().to_vector(), expected_a.to_vector(), tol);
    check_close(b.grad().to_vector(), expected_b.to_vector(), tol);
    sum(mul(matmul(a, b), seed)).backward();  // adds seed b^T and a^T seed again
    check_close(a.grad().to_vector(), add(expected_a, matmul(seed, b.detach(), false, true)).to_vector(), tol);
    check_close(b.grad().to_vector(), add(expected_b, expected_b).to_vector(), tol);
    // [2, 3, 4] x [4, 5] with A transposed: not folded, two slices add into dB.
    Tensor stack = randn64({2, 4, 3}, 34).detach().to(dtype).requires_grad_();
    Tensor w = randn64({4, 5}, 35).detach().to(dtype).requires_grad_();
    sum(matmul(stack, w, true, false)).backward();
    const Tensor ones = Tensor::ones({2, 3, 5}, dtype);
    check_close(w.grad().to_vector(), sum(matmul(stack.detach(), ones, false, false), {0}).to_vector(), tol);
  }
}

BOOST_AUTO_TEST_CASE(matmul_with_vectors) {
  const Tensor m = randn64({3, 4}, 15), v = randn64({4}, 16), w = randn64({3}, 17);
  BOOST_CHECK(matmul(m, v).shape() == (Shape{3}));
  BOOST_CHECK(matmul(w, m).shape() == (Shape{4}));
  BOOST_CHECK(matmul(v, v).shape().empty());
  check_gradients([](const Inputs& in) { return matmul(in[0], in[1]); }, {m, v});
  check_gradients([](const Inputs& in) { return matmul(in[0], in[1]); }, {w, m});
  check_gradients([](const Inputs& in) { return matmul(in[0], in[1]); }, {v, randn64({4}, 18)});
}

BOOST_AUTO_TEST_CASE(matmul_with_an_empty_inner_dimension_is_zero) {
  const Tensor c = matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 3}));
  BOOST_CHECK(c.shape() == (Shape{2, 3}));
  check_close(c.to_vector(), std::vector<double>(6, 0.0));
  // An empty product still hands its inputs zero gradients (an optimizer skips a
  // parameter without one), as PyTorch.
  Tensor a = randn64({2, 3}, 5), b = randn64({3, 0}, 6);
  sum(matmul(a, b)).backward();
  BOOST_REQUIRE(a.grad().defined() && b.grad().defined());
  check_close(a.grad().to_vector(), std::vector<double>(6, 0.0));
  Tensor x = randn64({2, 3}, 7), w = randn64({0, 3}, 8);
  sum(linear(x, w)).backward();
  BOOST_REQUIRE(x.grad().defined() && w.grad().defined());
  check_close(x.grad().to_vector(), std::vector<double>(6, 0.0));
}

BOOST_AUTO_TEST_CASE(matmul_errors_name_the_shapes) {
  check_error([] { matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); }, {"matmul", "[2, 3]", "[4, 5]", "3 and 4"});
  check_error([] { matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 4})); }, {"matmul", "batch", "[2, 2, 3]"});
  check_error([] { matmul(Tensor::zeros({3}), Tensor::zeros({3, 2}), true); }, {"matmul", "1-D"});
  // 1-D operands are named as given, not as the matrices they become.
  check_error([] { matmul(Tensor::zeros({3}), Tensor::zeros({4})); },
              {"matmul", "shapes [3] and [4]", "inner dimensions 3 and 4"});
  check_error([] { matmul(Tensor::zeros({2, 3}), Tensor::zeros({4})); }, {"shapes [2, 3] and [4]", "3 and 4"});
  check_error([] { matmul(Tensor::zeros({3}), Tensor::zeros({5, 4, 2})); }, {"shapes [3] and [5, 4, 2]", "3 and 4"});
  check_error(
      [] {
        matmul(Tensor::scalar(1.0), Tensor::zeros({3, 1}));
      },
      {"matmul", "at least 1 axis", "[] and [3, 1]"});
  check_error(
      [] {
        matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}, DType::float64));
      },
      {"matmul", "float32", "float64"});
}

BOOST_AUTO_TEST_CASE(linear_matches_matmul_plus_bias) {
  const Tensor x = randn64({2, 3, 4}, 20), w = randn64({5, 4}, 21), b = randn64({5}, 22);
  check_close(linear(x, w, b).to_vector(), (matmul(x, w, false, true) + b).to_vector(), 1e-12);
  check_close(linear(x, w).to_vector(), matmul(x, w, false, true).to_vector(), 1e-12);
  BOOST_CHECK(linear(randn64({4}, 23), w, b).shape() == (Shape{5}));
}

BOOST_AUTO_TEST_CASE(linear_gradients) {
  const Tensor x = randn64({2, 3, 4}, 24), w = randn64({5, 4}, 25), b = randn64({5}, 26);
  check_gradients([](const Inputs& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
  check_gradients([](const Inputs& in) { return linear(in[0], in[1]); }, {x, w});
  check_gradients([](const Inputs& in) { return linear(in[0], in[1], in[2]); }, {randn64({4}, 27), w, b});
  // The weight used twice in one graph accumulates through the GEMM's beta = 1.
  check_gradients([](const Inputs& in) { return linear(linear(in[0], in[1]), in[1], in[2]); },
                  {randn64({3, 4}, 28), randn64({4, 4}, 29), randn64({4}, 30)});
}

BOOST_AUTO_TEST_CASE(linear_errors) {
  check_error([] { linear(Tensor::zeros({2, 3}), Tensor::zeros({5, 4})); }, {"linear", "[2, 3]", "[5, 4]"});
  check_error(
      [] {
        linear(Tensor::zeros({2, 4}), Tensor::zeros({5, 4}), Tensor::zeros({4}));
      },
      {"linear", "bias", "[4]", "[5]"});
}

namespace {

// Bitwise equality of two tensors' values, NaN included.
bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(), [](double p, double q) {
           return std::bit_cast<std::uint64_t>(p) == std::bit_cast<std::uint64_t>(q);
         });
}

// x for linear_relu: N(0, 1), with a NaN, an infinity and a huge value (inf - inf
// pre-activations) in three rows, and a row of zeros (pre-activations the bias alone).
Tensor awkward_input(Shape shape, std::uint64_t seed, DType dtype) {
  Generator gen(seed);
  std::vector<double> v = Tensor::randn(shape, gen, DType::float64).to_vector();
  const std::size_t in = shape.back();
  v[0] = std::nan("");
  v[in + 1] = std::numeric_limits<double>::infinity();
  v[2 * in + 2] = 1e300;
  std::fill_n(v.begin() + 3 * in, in, 0.0);
  return Tensor::from_vector(v, std::move(shape), dtype, true);
}

}  // namespace

// The activations linear fuses: linear_relu and linear_gelu (exact and tanh), each with
// the op pair it stands for.
struct FusedLinear {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> fused, apart;
};

std::vector<FusedLinear> fused_linears() {
  return {
      {"linear_relu", [](const Tensor& x, const Tensor& w, const Tensor& b) { return linear_relu(x, w, b); },
       [](const Tensor& x, const Tensor& w, const Tensor& b) { return relu(linear(x, w, b)); }},
      {"linear_gelu", [](const Tensor& x, const Tensor& w, const Tensor& b) { return linear_gelu(x, w, b); },
       [](const Tensor& x, const Tensor& w, const Tensor& b) { return gelu(linear(x, w, b)); }},
      {"linear_gelu tanh", [](const Tensor& x, const Tensor& w, const Tensor& b) { return linear_gelu(x, w, b, true); },
       [](const Tensor& x, const Tensor& w, const Tensor& b) { return gelu(linear(x, w, b), true); }},
  };
}

// linear_relu is relu(linear(...)) bit for bit, and linear_gelu gelu(linear(...)), values
// and every gradient, in float32, float64 and bf16 autocast, with and without bias, on
// shapes the pool and the product splits cut (rows, columns and k: the activation runs on
// each piece as it is finished), and on empty ones.
BOOST_AUTO_TEST_CASE(fused_linear_activations_are_the_op_pairs_bit_for_bit) {
  struct Case {
    DType dtype;
    Precision precision;
    Shape x, w;
  };
  const std::vector<Case> cases = {
      {DType::float64, Precision::float32, {3, 70, 40}, {130, 40}},
      {DType::float32, Precision::float32, {3, 70, 40}, {130, 40}},
      {DType::float32, Precision::bfloat16, {3, 70, 40}, {130, 40}},
      {DType::float32, Precision::bfloat16, {2100, 16}, {600, 16}},  // split products: rows
      {DType::float32, Precision::float32, {2100, 16}, {600, 16}},
      {DType::float32, Precision::bfloat16, {40, 16}, {3000, 16}},  // columns
      {DType::float64, Precision::float32, {40, 16}, {3000, 16}},
      {DType::float32, Precision::bfloat16, {8, 4096}, {8, 4096}},  // k
      {DType::float32, Precision::float32, {8, 4096}, {8, 4096}},
      {DType::float64, Precision::float32, {7, 0}, {5, 0}},  // empty products
      {DType::float32, Precision::bfloat16, {7, 0}, {5, 0}},
      {DType::float32, Precision::bfloat16, {0, 6}, {5, 6}},
  };
  std::uint64_t seed = 40;
  for (const FusedLinear& op : fused_linears())
    for (const Case& c : cases)
      for (const bool with_bias : {true, false}) {
        const bool awkward = numel(c.x) > 3 * c.x.back() && c.x.back() > 2;
        Tensor x = awkward ? awkward_input(c.x, ++seed, c.dtype) : randn64(c.x, ++seed).to(c.dtype).detach();
        x.requires_grad_();
        const Tensor w = randn64(c.w, ++seed).to(c.dtype).detach().requires_grad_();
        const Tensor b = with_bias ? randn64({c.w[0]}, ++seed).to(c.dtype).detach().requires_grad_() : Tensor();
        Shape y_shape = c.x;
        y_shape.back() = c.w[0];
        const Tensor seed_grad = randn64(y_shape, ++seed, false).to(c.dtype);
        const auto run = [&](bool fused) {
          for (Tensor t : {x, w, b})  // a handle: the same tensor
            if (t.defined()) t.zero_grad();
          Tensor y;
          {
            const AutocastGuard guard(c.precision);
            y = fused ? op.fused(x, w, b) : op.apart(x, w, b);
          }
          y.backward(seed_grad);
          std::vector<Tensor> results{y.detach(), x.grad(), w.grad()};
          if (with_bias) results.push_back(b.grad());
          return results;
        };
        const std::vector<Tensor> fused = run(true), apart = run(false);
        for (std::size_t i = 0; i < fused.size(); ++i)
          BOOST_TEST(same_bits(fused[i], apart[i]),
                     str(op.name, ": result ", i, " for x ", c.x, ", weight ", c.w, with_bias ? ", bias, " : ", ",
                         dtype_name(c.dtype), c.precision == Precision::bfloat16 ? ", bf16" : ""));
      }
}

// linear's bias gradient, the column sums of dY (taken in fixed chunks of rows, added in
// chunk order), is the same bits on 1, 2 and 3 threads, in float32, float64 and bf16
// autocast, relu fused in or not, on shapes the pool cuts with a part-chunk of rows and a
// part-block of columns left over; and it is the column sums, within the rounding of that
// many float32 additions (rows x 2^-24 x the sum of |dY|; float64 within 1e-12 of it).
BOOST_AUTO_TEST_CASE(linear_bias_gradient_is_the_same_on_any_thread_count) {
  const int threads = num_threads();
  const std::size_t rows = 2100, in = 16, out = 600;
  for (const DType dtype : {DType::float32, DType::float64})
    for (const Precision precision : {Precision::float32, Precision::bfloat16}) {
      if (dtype == DType::float64 && precision == Precision::bfloat16) continue;
      for (const bool relu_fused : {false, true}) {
        const Tensor x = randn64({rows, in}, 70).to(dtype).detach();
        const Tensor w = randn64({out, in}, 71).to(dtype).detach();
        Tensor b = randn64({out}, 72).to(dtype).detach().requires_grad_();
        const Tensor seed_grad = randn64({rows, out}, 73).to(dtype);
        std::vector<Tensor> grads;
        for (const int t : {1, 2, 3}) {
          set_num_threads(t);
          b.zero_grad();
          {
            const AutocastGuard guard(precision);
            (relu_fused ? linear_relu(x, w, b) : linear(x, w, b)).backward(seed_grad);
          }
          grads.push_back(b.grad().detach().clone());
        }
        const std::string what =
            str(dtype_name(dtype), precision == Precision::bfloat16 ? " bf16" : "", relu_fused ? " relu" : "");
        BOOST_TEST(same_bits(grads[1], grads[0]), what << " on 2 threads");
        BOOST_TEST(same_bits(grads[2], grads[0]), what << " on 3 threads");
        if (relu_fused) continue;
        const std::vector<double> g = seed_grad.to_vector(), db = grads[0].to_vector();
        for (std::size_t o = 0; o < out; ++o) {
          double sum = 0, magnitude = 0;
          for (std::size_t r = 0; r < rows; ++r) {
            sum += g[r * out + o];
            magnitude += std::abs(g[r * out + o]);
          }
          const double bound = dtype == DType::float32 ? rows * 0x1p-24 * magnitude : 1e-12 * magnitude;
          BOOST_TEST(std::abs(db[o] - sum) <= bound, what << " column " << o);
        }
      }
    }
  set_num_threads(threads);
}

BOOST_AUTO_TEST_CASE(linear_relu_gradients) {
  const Tensor x = randn64({2, 3, 4}, 60), w = randn64({5, 4}, 61), b = randn64({5}, 62);
  check_gradients([](const Inputs& in) { return linear_relu(in[0], in[1], in[2]); }, {x, w, b});
  check_gradients([](const Inputs& in) { return linear_relu(in[0], in[1]); }, {x, w});
  check_gradients([](const Inputs& in) { return linear_relu(in[0], in[1], in[2]); }, {randn64({4}, 63), w, b});
}

BOOST_AUTO_TEST_CASE(linear_gelu_gradients) {
  const Tensor x = randn64({2, 3, 4}, 64), w = randn64({5, 4}, 65), b = randn64({5}, 66);
  for (const bool approximate : {false, true}) {
    check_gradients([approximate](const Inputs& in) { return linear_gelu(in[0], in[1], in[2], approximate); },
                    {x, w, b});
    check_gradients([approximate](const Inputs& in) { return linear_gelu(in[0], in[1], Tensor(), approximate); },
                    {x, w});
    check_gradients([approximate](const Inputs& in) { return linear_gelu(in[0], in[1], in[2], approximate); },
                    {randn64({4}, 67), w, b});
  }
}

BOOST_AUTO_TEST_CASE(linear_relu_errors_name_it) {
  check_error([] { linear_relu(Tensor::zeros({2, 3}), Tensor::zeros({5, 4})); }, {"linear_relu", "[2, 3]", "[5, 4]"});
  check_error(
      [] {
        linear_relu(Tensor::zeros({2, 4}), Tensor::zeros({5, 4}), Tensor::zeros({4}));
      },
      {"linear_relu", "bias", "[4]", "[5]"});
  check_error(
      [] {
        linear_relu(Tensor::zeros({2, 4}), Tensor::zeros({5, 4}, DType::float64));
      },
      {"linear_relu", "float32", "float64"});
}

// A weight gradient summed over many rows takes the split-k path; a second backward adds
// into the first (GEMM beta = 1 on the partial sums).
BOOST_AUTO_TEST_CASE(split_weight_gradients_accumulate) {
  const Tensor x = randn64({4000, 30}, 5), w = randn64({20, 30}, 6), b = randn64({20}, 7);
  sum(linear(x, w, b)).backward();
  const std::vector<double> once = w.grad().to_vector();
  std::vector<double> expected(20 * 30, 0.0);  // dW[o][i] = sum over rows of x[r][i]
  const std::vector<double> xs = x.to_vector();
  for (std::size_t o = 0; o < 20; ++o)
    for (std::size_t i = 0; i < 30; ++i)
      for (std::size_t r = 0; r < 4000; ++r) expected[o * 30 + i] += xs[r * 30 + i];
  check_close(once, expected, 1e-12);
  sum(linear(x, w, b)).backward();
  for (double& e : expected) e *= 2;
  check_close(w.grad().to_vector(), expected, 1e-12);
}
