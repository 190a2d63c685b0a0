#define BOOST_TEST_MODULE bf16
// Mixed precision: bfloat16 rounding, bf16 products (oneDNN, or OpenBLAS on widened
// operands: ctest runs this suite under each path), and AutocastGuard on matmul and linear.
//
// Tolerances, from the format: a bf16 operand carries 8 significant bits, so rounding one
// to nearest moves it by at most u16 = 2^-8 of itself (half a unit in the last place); the product of two bf16 values
// has at most 16 significant bits and is exact in float32; a float32 sum of k terms, in any order, is within k * u32
// (u32 = 2^-24) of the exact sum of their magnitudes. So, for C = alpha A B
// + beta C0 in bf16 against float64 on the same rounded operands:
//   |C - exact| <= (k + 2) * u32 * (|alpha| sum_p |a_ip b_pj| + |beta c0_ij|),
// and against float32 on the unrounded operands, each term a_ip b_pj moving by at most
// (2 u16 + u16^2) of itself, add (2 u16 + u16^2) |alpha| sum_p |a_ip b_pj|.
#include "helpers.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <thread>
#include <tuple>
#include <utility>

#include "xgrad/autograd/kernels/gemm.hpp"
#include "xgrad/autograd/kernels/onednn_matmul.hpp"
#include "xgrad/autograd/node.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/profiler.hpp"
#include "xgrad/optim/adam.hpp"
#include "xgrad/optim/clip.hpp"
#include "xgrad/optim/sgd.hpp"

using namespace xgrad;
using namespace xgrad::test;
using kernels::bfloat16;

namespace {

constexpr double kU32 = 0x1p-24, kU16 = 0x1p-8;

float round_trip(float x) { return kernels::to_float(kernels::to_bfloat16(x)); }

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  Generator gen(seed);
  const Tensor t = Tensor::randn({n}, gen);
  return {t.data<float>(), t.data<float>() + n};
}

struct Product {
  bool trans_a, trans_b;
  std::size_t m, n, k;
};

// C = alpha op(A) op(B) + beta C0 in float64 on the given operands, and the bound's scale
// |alpha| sum |a b| + |beta c0| per element (op(B) made a row-major k x n copy first, each
// row of C summed over k in the inner loop's columns: fast enough for products of 10^9 terms).
void reference(const Product& p, double alpha, const std::vector<double>& a, const std::vector<double>& b, double beta,
               const std::vector<double>& c0, std::vector<double>& c, std::vector<double>& scale) {
  std::vector<double> op_b(p.k * p.n);
  for (std::size_t q = 0; q < p.k; ++q)
    for (std::size_t j = 0; j < p.n; ++j) op_b[q * p.n + j] = p.trans_b ? b[j * p.k + q] : b[q * p.n + j];
  c.assign(p.m * p.n, 0);
  scale.assign(p.m * p.n, 0);
  std::vector<double> sum(p.n), magnitude(p.n);
  for (std::size_t i = 0; i < p.m; ++i) {
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(magnitude.begin(), magnitude.end(), 0.0);
    for (std::size_t q = 0; q < p.k; ++q) {
      const double x = p.trans_a ? a[q * p.m + i] : a[i * p.k + q];
      const double* row = op_b.data() + q * p.n;
      for (std::size_t j = 0; j < p.n; ++j) {
        sum[j] += x * row[j];
        magnitude[j] += std::abs(x * row[j]);
      }
    }
    for (std::size_t j = 0; j < p.n; ++j) {
      c[i * p.n + j] = alpha * sum[j] + beta * c0[i * p.n + j];
      scale[i * p.n + j] = std::abs(alpha) * magnitude[j] + std::abs(beta * c0[i * p.n + j]);
    }
  }
}

// [m, n, k] of products that stay one call, split by rows, by columns and along k: from
// k = 4 max(m, n), and (a weight gradient's layout, on AMX) from 2 max(m, n) with halves at
// least 512 deep; 520 x 16 x 600 by columns, or on AMX by rows, A stored transposed too
// (kernels/gemm.cpp, cut_of).
const std::vector<std::array<std::size_t, 3>> kShapes{{7, 5, 3},      {300, 90, 120},  {70, 410, 150},
                                                      {40, 50, 1200}, {24, 400, 1024}, {520, 600, 16}};

// The bf16 product of random operands (each rounded to bf16) within the bound of a float32
// sum of the rounded terms, and further from float32's own product than float32's error
// allows (it ran in bf16).
void check_product_bounds(const Product& p, float alpha, float beta, bool with_bias,
                          kernels::CStore store = kernels::CStore::cached) {
  const auto [trans_a, trans_b, m, n, k] = p;
  const std::vector<float> a = random_floats(m * k, 3), b = random_floats(k * n, 4), c0 = random_floats(m * n, 5),
                           bias = random_floats(n, 6);
  std::vector<bfloat16> ab(a.size()), bb(b.size());
  kernels::round_to_bfloat16(a.data(), 1, a.size(), a.size(), ab.data());
  kernels::round_to_bfloat16(b.data(), 1, b.size(), b.size(), bb.data());
  std::vector<float> c = c0;
  kernels::gemm(trans_a, trans_b, m, n, k, alpha, ab.data(), trans_a ? m : k, bb.data(), trans_b ? k : n, beta,
                c.data(), n, with_bias ? bias.data() : nullptr, store);
  std::vector<double> a_rounded(a.size()), b_rounded(b.size()), exact, scale, unrounded, unrounded_scale;
  for (std::size_t i = 0; i < a.size(); ++i) a_rounded[i] = kernels::to_float(ab[i]);
  for (std::size_t i = 0; i < b.size(); ++i) b_rounded[i] = kernels::to_float(bb[i]);
  const std::vector<double> c0d(c0.begin(), c0.end());
  reference(p, alpha, a_rounded, b_rounded, beta, c0d, exact, scale);
  reference(p, alpha, std::vector<double>(a.begin(), a.end()), std::vector<double>(b.begin(), b.end()), beta, c0d,
            unrounded, unrounded_scale);
  if (with_bias)  // one more term of each sum: within the bound's k + 2
    for (std::size_t i = 0; i < c.size(); ++i) {
      const double added = bias[i % n];
      exact[i] += added, unrounded[i] += added;
      scale[i] += std::abs(added), unrounded_scale[i] += std::abs(added);
    }
  std::size_t worst = 0, moved = 0;
  double worst_ratio = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const double bound = static_cast<double>(k + 2) * kU32 * scale[i];
    const double ratio = std::abs(c[i] - exact[i]) / bound;
    if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
    const double unrounded_terms =  // what the operands' rounding moves: not beta C0, not the bias
        unrounded_scale[i] - std::abs(beta * c0d[i]) - (with_bias ? std::abs(bias[i % n]) : 0.0);
    const double near_f32 = bound + (2 * kU16 + kU16 * kU16) * unrounded_terms;
    BOOST_TEST(std::abs(c[i] - unrounded[i]) <= near_f32);
    moved += std::abs(c[i] - unrounded[i]) > static_cast<double>(k + 2) * kU32 * unrounded_scale[i];
  }
  BOOST_TEST(worst_ratio <= 1.0, m << " x " << k << " x " << n << " trans " << trans_a << trans_b
                                   << (with_bias ? " with a bias" : "") << " alpha " << alpha << " beta " << beta
                                   << (store == kernels::CStore::streamed ? " streamed" : "") << ": element " << worst
                                   << " at " << worst_ratio << " of the bound");
  // The operands were rounded: some element is further from float32's product than
  // float32's own error allows (this fails if the product ran in float32). Past a few
  // thousand terms float32's bound (k u32 of the scale) outgrows the rounding's random walk
  // (about sqrt(k) u16): there it says nothing.
  if (k <= 2048)
    BOOST_TEST(moved > 0u, m << " x " << k << " x " << n << " trans " << trans_a << trans_b << " alpha " << alpha
                             << " beta " << beta);
}

}  // namespace

// ctest runs this suite three times, oneDNN's DNNL_MAX_CPU_ISA capping the path: the cap
// is obeyed (on a CPU below it, the CPU's own path runs).
BOOST_AUTO_TEST_CASE(the_path_obeys_onednns_cap) {
  BOOST_TEST_MESSAGE("bf16 products: " << bf16_summary());
  const char* cap = std::getenv("DNNL_MAX_CPU_ISA");
  if (cap && (std::string(cap) == "AVX2" || std::string(cap) == "AVX512_CORE"))
    BOOST_TEST((kernels::bf16_path() == kernels::Bf16Path::kWidened));
}

BOOST_AUTO_TEST_CASE(rounding_is_to_nearest_even) {
  BOOST_TEST(kernels::to_bfloat16(1.0f).bits == 0x3f80);
  BOOST_TEST(kernels::to_bfloat16(1.0f + 0x1p-8f).bits == 0x3f80);             // a tie: to the even neighbour
  BOOST_TEST(kernels::to_bfloat16(1.0f + 3 * 0x1p-8f).bits == 0x3f82);         // a tie: up, to the even one
  BOOST_TEST(kernels::to_bfloat16(1.0f + 0x1p-8f + 0x1p-20f).bits == 0x3f81);  // past the tie: up
  BOOST_TEST(kernels::to_bfloat16(-0.0f).bits == 0x8000);
  BOOST_TEST(std::isinf(round_trip(std::numeric_limits<float>::max())));  // past bf16's largest
  BOOST_TEST(round_trip(-std::numeric_limits<float>::infinity()) == -std::numeric_limits<float>::infinity());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  BOOST_TEST(std::isnan(round_trip(nan)));
  BOOST_TEST(std::isnan(round_trip(std::bit_cast<float>(0x7f800001u))));  // a NaN only in the low bits
  BOOST_TEST(std::signbit(round_trip(-nan)));
  BOOST_TEST(round_trip(1e-40f) != 0.0f);  // denormals are kept
  for (const float x : random_floats(10000, 1)) {
    const float r = round_trip(x);
    BOOST_TEST(std::abs(r - x) <= kU16 * std::abs(x), x);
    BOOST_TEST((std::bit_cast<std::uint32_t>(r) & 0xffffu) == 0u);
  }
  std::vector<float> block(6 * 9), rows(4 * 5);
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<float>(i) + 0.3f;
  std::vector<bfloat16> dense(rows.size());
  kernels::round_to_bfloat16(block.data() + 1, 4, 5, 9, dense.data());  // a 4 x 5 block, row stride 9
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t c = 0; c < 5; ++c)
      BOOST_TEST(kernels::to_float(dense[r * 5 + c]) == round_trip(block[1 + r * 9 + c]));
}

// The array rounding (32 at a time by vcvtne2ps2bf16 where built for AVX512_BF16, through
// the caches or streamed past them) gives
// to_bfloat16's bits for every kind of float: ties either way, the largest finite values
// (rounding to infinity), infinities, quiet and signalling NaNs of either sign with their
// payloads, zeros, and denormals (which the instruction would flush), alone in a batch of
// 32 or among normals, at every offset and length (tails).
BOOST_AUTO_TEST_CASE(array_rounding_gives_every_floats_bits) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {1.0f + 0x1p-8f,
                                      1.0f + 3 * 0x1p-8f,
                                      -1.0f - 0x1p-8f,
                                      std::numeric_limits<float>::max(),
                                      -std::numeric_limits<float>::max(),
                                      inf,
                                      -inf,
                                      std::bit_cast<float>(0x7fc00001u),
                                      std::bit_cast<float>(0x7f800001u),
                                      std::bit_cast<float>(0xffa12345u),
                                      0.0f,
                                      -0.0f,
                                      1e-40f,
                                      -1e-40f,
                                      std::bit_cast<float>(0x007fffffu),
                                      std::bit_cast<float>(0x00000001u),
                                      std::numeric_limits<float>::min()};
  std::vector<float> values = random_floats(4096, 5);
  for (std::size_t i = 0; i < values.size(); i += 37) values[i] = special[(i / 37) % special.size()];
  for (std::size_t i = 0; i < 32; ++i) values[64 + i] = 1e-39f * static_cast<float>(i + 1);  // a batch all denormal
  for (const Bf16Store store : {Bf16Store::cached, Bf16Store::streamed})
    for (std::size_t offset : {0, 1, 7})
      for (std::size_t n : {0, 1, 31, 32, 33, 95, 1000, 4000}) {
        std::vector<bfloat16> out(n + 2, bfloat16{0xabcd});
        bfloat16* at = out.data() + offset % 2;  // streamed: lines start at other elements
        kernels::to_bfloat16_n(values.data() + offset, n, at, store);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i) wrong += at[i].bits != kernels::to_bfloat16(values[offset + i]).bits;
        BOOST_TEST(wrong == 0u, "offset " << offset << ", n " << n << ", streamed " << (store == Bf16Store::streamed));
        BOOST_TEST(at[n].bits == 0xabcd, "past the end written, n " << n);
        BOOST_TEST((offset % 2 == 0 || out[0].bits == 0xabcd), "before the start written, n " << n);
      }
}

BOOST_AUTO_TEST_CASE(bf16_products_are_within_the_format_bounds) {
  for (const auto& [m, n, k] : kShapes)
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const auto& [alpha, beta, with_bias] : std::vector<std::tuple<float, float, bool>>{
                 {1.0f, 0.0f, false}, {0.5f, 1.0f, false}, {1.0f, 0.0f, true}, {0.5f, 1.0f, true}})
          check_product_bounds({trans_a, trans_b, m, n, k}, alpha, beta, with_bias);
}

// Calls that run otherwise where AMX runs the products (kernels/gemm.cpp): a call whose B
// is more than 1 MiB deep, chained along k (128 x 8,320 x 512 in eight k panels of 1,040,
// each two links; 128 x 2,048 x 640 with A stored transposed, a weight gradient's layout, in
// two panels of 1,024, each two links), and C streamed past the caches (CStore::streamed,
// C over 1 MiB: 600 x 4 x 520 one call in two blocks of rows, 520 x 16 x 600 cut into row
// panels, in every layout). Each within the bound with alpha, beta (a streamed C with beta
// 1 is written through the caches) and a bias, and the same bits on 1, 2 and 3 threads.
// Elsewhere they are the products of the tests above.
BOOST_AUTO_TEST_CASE(chained_and_streamed_products_are_within_the_bounds) {
  const std::vector<std::tuple<Product, kernels::CStore>> products{
      {{false, false, 128, 512, 8320}, kernels::CStore::cached},
      {{true, false, 128, 640, 2048}, kernels::CStore::cached},
      {{false, false, 600, 520, 4}, kernels::CStore::streamed},
      {{true, false, 600, 520, 4}, kernels::CStore::streamed},
      {{false, true, 600, 520, 4}, kernels::CStore::streamed},
      {{true, true, 600, 520, 4}, kernels::CStore::streamed},
      {{true, false, 520, 600, 16}, kernels::CStore::streamed},
      {{false, true, 520, 600, 16}, kernels::CStore::streamed}};
  for (const auto& [p, store] : products)
    for (const auto& [alpha, beta, with_bias] :
         std::vector<std::tuple<float, float, bool>>{{1.0f, 0.0f, false}, {0.5f, 1.0f, true}, {0.5f, 0.0f, true}})
      check_product_bounds(p, alpha, beta, with_bias, store);
  const int threads = num_threads();
  for (const auto& [p, store] : products) {
    const auto [trans_a, trans_b, m, n, k] = p;
    const std::vector<float> a = random_floats(m * k, 6), b = random_floats(k * n, 7), bias = random_floats(n, 8);
    std::vector<bfloat16> ab(a.size()), bb(b.size());
    kernels::round_to_bfloat16(a.data(), 1, a.size(), a.size(), ab.data());
    kernels::round_to_bfloat16(b.data(), 1, b.size(), b.size(), bb.data());
    std::vector<float> on_one_thread;
    for (const int t : {1, 2, 3}) {
      set_num_threads(t);
      std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());  // beta 0 ignores it
      kernels::gemm(trans_a, trans_b, m, n, k, 0.5f, ab.data(), trans_a ? m : k, bb.data(), trans_b ? k : n, 0.0f,
                    c.data(), n, bias.data(), store);
      if (t == 1)
        on_one_thread = c;
      else
        BOOST_TEST((c == on_one_thread),
                   m << " x " << k << " x " << n << " trans " << trans_a << trans_b << " on " << t << " threads");
    }
  }
  set_num_threads(threads);
}

// A sum of no terms (k = 0): C = beta C plus the bias, as linear with no inputs gives.
BOOST_AUTO_TEST_CASE(bf16_products_of_no_terms_keep_the_bias) {
  const std::vector<float> bias{1.5f, -2.0f, 0.25f};
  std::vector<float> c(2 * 3, std::numeric_limits<float>::quiet_NaN());
  kernels::gemm(false, true, 2, 3, 0, 1.0f, static_cast<const bfloat16*>(nullptr), 1,
                static_cast<const bfloat16*>(nullptr), 1, 0.0f, c.data(), 3, bias.data());
  for (std::size_t i = 0; i < c.size(); ++i) BOOST_TEST(c[i] == bias[i % 3]);
  std::vector<float> kept(2 * 3, 4.0f);
  kernels::gemm(false, false, 2, 3, 0, 1.0f, static_cast<const bfloat16*>(nullptr), 1,
                static_cast<const bfloat16*>(nullptr), 1, 0.5f, kept.data(), 3, bias.data());
  for (std::size_t i = 0; i < kept.size(); ++i) BOOST_TEST(kept[i] == 2.0f + bias[i % 3]);
}

// oneDNN's primitives are made once per shape and thread and kept, at most 256 shapes,
// the cache cleared past that: a shape made again gives the same bits, and beta = 0
// ignores what C held (NaN included), as BLAS does.
BOOST_AUTO_TEST_CASE(bf16_products_survive_the_primitive_cache_being_cleared) {
  const auto product = [](std::size_t m, std::size_t n, std::size_t k, float c_before) {
    const std::vector<float> a = random_floats(m * k, 8), b = random_floats(k * n, 9);
    std::vector<bfloat16> ab(a.size()), bb(b.size());
    kernels::round_to_bfloat16(a.data(), 1, a.size(), a.size(), ab.data());
    kernels::round_to_bfloat16(b.data(), 1, b.size(), b.size(), bb.data());
    std::vector<float> c(m * n, c_before);
    kernels::gemm(false, true, m, n, k, 0.5f, ab.data(), k, bb.data(), k, 0.0f, c.data(), n);
    return c;
  };
  const std::vector<float> first = product(48, 40, 32, 0.0f);
  for (std::size_t m = 1; m <= 300; ++m) {  // more shapes than the cache keeps
    const std::vector<float> c = product(m, 3, 5, std::numeric_limits<float>::quiet_NaN());
    BOOST_TEST(std::all_of(c.begin(), c.end(), [](float x) { return std::isfinite(x); }), m << " x 5 x 3");
  }
  BOOST_TEST((product(48, 40, 32, std::numeric_limits<float>::quiet_NaN()) == first));
}

// Operands inside larger matrices (row strides past their rows, as panels and attention's
// blocks are) run oneDNN's brgemm primitive on dense copies where that is switched on (by
// default with AMX): the same bits as the product of dense operands, C's elements outside
// the product untouched, and no call left to oneDNN's gemm API.
BOOST_AUTO_TEST_CASE(strided_bf16_products_run_the_primitive_on_dense_copies) {
  if (kernels::bf16_path() != kernels::Bf16Path::kOneDnnNative) return;  // OpenBLAS: no primitive
  const bool setting = kernels::dense_copies_for_brgemm();
  kernels::set_dense_copies_for_brgemm(true);
  constexpr std::size_t kPad = 7;  // extra elements on every row of A, B and C
  constexpr float kUntouched = -1234.5f;
  for (const auto& [m, n, k] : std::vector<std::array<std::size_t, 3>>{{70, 50, 40}, {300, 90, 120}, {40, 600, 500}})
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const auto& [beta, with_bias] : std::vector<std::pair<float, bool>>{{0.0f, false}, {1.0f, true}}) {
          const std::size_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
          const std::size_t b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
          const std::vector<float> a = random_floats(a_rows * a_cols, 11), b = random_floats(b_rows * b_cols, 12),
                                   c0 = random_floats(m * n, 13), bias = random_floats(n, 14);
          std::vector<bfloat16> ab(a.size()), bb(b.size());
          kernels::round_to_bfloat16(a.data(), 1, a.size(), a.size(), ab.data());
          kernels::round_to_bfloat16(b.data(), 1, b.size(), b.size(), bb.data());
          std::vector<bfloat16> a_strided(a_rows * (a_cols + kPad)), b_strided(b_rows * (b_cols + kPad));
          for (std::size_t r = 0; r < a_rows; ++r)
            std::copy_n(ab.data() + r * a_cols, a_cols, a_strided.data() + r * (a_cols + kPad));
          for (std::size_t r = 0; r < b_rows; ++r)
            std::copy_n(bb.data() + r * b_cols, b_cols, b_strided.data() + r * (b_cols + kPad));
          std::vector<float> c_dense = c0, c_strided(m * (n + kPad), kUntouched);
          for (std::size_t r = 0; r < m; ++r) std::copy_n(c0.data() + r * n, n, c_strided.data() + r * (n + kPad));
          const float* bias_or_null = with_bias ? bias.data() : nullptr;
          kernels::gemm(trans_a, trans_b, m, n, k, 1.0f, ab.data(), a_cols, bb.data(), b_cols, beta, c_dense.data(), n,
                        bias_or_null);
          Profiler profiler;
          kernels::gemm(trans_a, trans_b, m, n, k, 1.0f, a_strided.data(), a_cols + kPad, b_strided.data(),
                        b_cols + kPad, beta, c_strided.data(), n + kPad, bias_or_null);
          profiler.stop();
          std::size_t gemm_api_calls = 0, primitive_calls = 0;
          for (const profile::ThreadLog& t : profiler.threads())
            for (const profile::Event& e : t.events) {
              if (!e.name) continue;
              gemm_api_calls += e.name == std::string_view("bf16 gemm (oneDNN)");
              primitive_calls += e.name == std::string_view("bf16 matmul (oneDNN primitive)");
            }
          const auto what = [&] {
            return std::to_string(m) + " x " + std::to_string(k) + " x " + std::to_string(n) + " trans " +
                   std::to_string(trans_a) + std::to_string(trans_b) + " beta " + std::to_string(beta);
          };
          BOOST_TEST(gemm_api_calls == 0u, what());
          BOOST_TEST(primitive_calls > 0u, what());
          bool same = true, untouched = true;
          for (std::size_t r = 0; r < m; ++r)
            for (std::size_t j = 0; j < n + kPad; ++j) {
              const float got = c_strided[r * (n + kPad) + j];
              if (j < n)
                same = same && got == c_dense[r * n + j];
              else
                untouched = untouched && got == kUntouched;
            }
          BOOST_TEST(same, what());
          BOOST_TEST(untouched, what());
        }
  kernels::set_dense_copies_for_brgemm(setting);
}

BOOST_AUTO_TEST_CASE(bf16_products_give_the_same_bits_on_any_thread_count) {
  const int threads = num_threads();
  std::vector<std::vector<float>> on_one_thread;
  for (const int t : {1, 2, 3, 8}) {
    set_num_threads(t);
    for (std::size_t s = 0; s < kShapes.size(); ++s) {
      const auto [m, n, k] = kShapes[s];
      const std::vector<float> a = random_floats(m * k, 6), b = random_floats(k * n, 7);
      std::vector<bfloat16> ab(a.size()), bb(b.size());
      kernels::round_to_bfloat16(a.data(), 1, a.size(), a.size(), ab.data());
      kernels::round_to_bfloat16(b.data(), 1, b.size(), b.size(), bb.data());
      std::vector<float> c(4 * m * n);  // the four layouts side by side
      for (std::size_t layout = 0; layout < 4; ++layout) {
        const bool trans_a = layout & 1, trans_b = layout & 2;
        kernels::gemm(trans_a, trans_b, m, n, k, 1.0f, ab.data(), trans_a ? m : k, bb.data(), trans_b ? k : n, 0.0f,
                      c.data() + layout * m * n, n);
      }
      if (t == 1)
        on_one_thread.push_back(c);
      else
        BOOST_TEST((c == on_one_thread[s]), m << " x " << k << " x " << n << " on " << t << " threads");
    }
  }
  set_num_threads(threads);
}

// A weight's rounding read blocked (kernels/onednn_matmul.hpp), for the forward's layout
// (op(B) = W^T) and the input gradient's (op(B) = W), in one call and cut by rows, columns
// and k, on 1 and 3 threads, with and without the primitive on dense copies of strided
// panels: the same bits on every thread count; the same bits as the product on its plain
// rounding on AVX512_BF16 and on the widened path; on AMX, which sums a blocked B in other
// chunks past about 1,000 terms, each within the bound of a float32 sum of the rounded
// operands. Where the primitive takes a panel whose B is a dense part of W, it reads a
// blocked copy, made by the first product and reused by the next.
BOOST_AUTO_TEST_CASE(weight_products_read_blocked_copies) {
  const int threads = num_threads();
  const bool dense_copies = kernels::dense_copies_for_brgemm();
  const bool primitive =
      kernels::bf16_path() == kernels::Bf16Path::kOneDnnNative && kernels::onednn_bf16_kernel().rfind("brg", 0) == 0;
  const bool amx = kernels::onednn_bf16_kernel().find("amx") != std::string::npos;
  enum Cut { kOne, kRows, kColumns, kInner };
  // cut: without copies; dense_cut_wt, dense_cut_w: where strided panels are copied dense
  // (AMX), for op(B) = W^T and W. There C's rows are cut when A is not transposed (their
  // panels are dense), unless C's columns or k give at least twice the panels (a few hundred
  // rows and a wide or deep product: kernels/gemm.cpp, cut_of).
  struct Shape3 {
    std::size_t m, n, k;
    Cut cut, dense_cut_wt, dense_cut_w;
  };
  for (const bool copies_on : {false, true})
    for (const auto& [m, n, k, cut, dense_cut_wt, dense_cut_w] :
         std::vector<Shape3>{{7, 5, 3, kOne, kOne, kOne},
                             {1, 73, 30, kOne, kOne, kOne},
                             {1100, 96, 128, kRows, kRows, kRows},
                             {300, 90, 120, kRows, kRows, kRows},
                             {40, 1500, 64, kColumns, kRows, kRows},
                             {40, 50, 1200, kInner, kRows, kInner},
                             {256, 768, 1000, kColumns, kColumns, kColumns}})
      for (const bool trans_b : {true, false})
        for (const auto& [beta, with_bias] : std::vector<std::pair<float, bool>>{{0.0f, false}, {1.0f, true}}) {
          kernels::set_dense_copies_for_brgemm(copies_on);
          const std::size_t w_rows = trans_b ? n : k, w_cols = trans_b ? k : n;
          const std::vector<float> a = random_floats(m * k, 21), w = random_floats(w_rows * w_cols, 22),
                                   c0 = random_floats(m * n, 23), bias = random_floats(n, 24);
          std::vector<bfloat16> ab(a.size());
          kernels::round_to_bfloat16(a.data(), 1, a.size(), a.size(), ab.data());
          const kernels::Bf16Weight weight(w.data(), w_rows, w_cols, 0);
          const float* bias_or_null = with_bias ? bias.data() : nullptr;
          std::vector<float> plain = c0;
          kernels::gemm(false, trans_b, m, n, k, 1.0f, ab.data(), k, weight, kernels::WeightRead::plain, beta,
                        plain.data(), n, bias_or_null);
          BOOST_TEST(weight.blocked_copies() == 0u, "a plain read makes no blocked copy");
          // The bound's scale per element: sum |a b| + |beta c0| + |bias| on the rounded operands.
          std::vector<double> scale(m * n);
          for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
              double magnitude = std::abs(beta * c0[i * n + j]) + (with_bias ? std::abs(bias[j]) : 0.0);
              for (std::size_t q = 0; q < k; ++q)
                magnitude += std::abs(static_cast<double>(kernels::to_float(ab[i * k + q])) *
                                      round_trip(trans_b ? w[j * k + q] : w[q * n + j]));
              scale[i * n + j] = magnitude;
            }
          const Cut taken = copies_on && primitive ? (trans_b ? dense_cut_wt : dense_cut_w) : cut;
          // B's panels are dense parts of W (rows of W), and the primitive takes the panels
          // (C and A dense, or copied dense).
          const bool b_panels_dense = taken == kOne || taken == kRows || (taken == kColumns) == trans_b;
          const bool blocked_expected = primitive && b_panels_dense && (copies_on || taken == kOne || taken == kRows);
          std::size_t copies = 0;
          std::vector<float> first;
          for (const int t : {1, 3, 1}) {
            set_num_threads(t);
            std::vector<float> blocked = c0;
            kernels::gemm(false, trans_b, m, n, k, 1.0f, ab.data(), k, weight, kernels::WeightRead::blocked, beta,
                          blocked.data(), n, bias_or_null);
            const std::string what = std::to_string(m) + " x " + std::to_string(k) + " x " + std::to_string(n) +
                                     (trans_b ? " W^T" : " W") + " beta " + std::to_string(beta) + " on " +
                                     std::to_string(t) + " threads, dense copies " + (copies_on ? "on" : "off");
            if (!amx) {
              BOOST_TEST((blocked == plain), what);
            } else {
              // Two float32 sums of the same exact products, each within (k + 2) u32 of them.
              std::size_t outside = 0;
              for (std::size_t i = 0; i < blocked.size(); ++i)
                outside += std::abs(static_cast<double>(blocked[i]) - plain[i]) >
                           2.0 * static_cast<double>(k + 2) * kU32 * scale[i];
              BOOST_TEST(outside == 0u, what << ": " << outside << " elements apart beyond the bound");
            }
            if (first.empty())
              first = blocked;
            else
              BOOST_TEST((blocked == first), what << ": the same bits as on one thread");
            if (copies > 0)
              BOOST_TEST(weight.blocked_copies() == copies, what << ": the copies are reused, not made again");
            copies = weight.blocked_copies();
          }
          BOOST_TEST((copies > 0) == blocked_expected,
                     copies << " blocked copies of " << m << " x " << k << " x " << n << (trans_b ? " W^T" : " W"));
        }
  set_num_threads(threads);
  kernels::set_dense_copies_for_brgemm(dense_copies);
  const kernels::Bf16Weight weight(random_floats(12, 25).data(), 3, 4, 0);
  std::vector<float> c(2 * 4);
  const std::vector<bfloat16> a(2 * 3);
  BOOST_CHECK_THROW(
      kernels::gemm(false, true, 2, 4, 3, 1.0f, a.data(), 3, weight, kernels::WeightRead::blocked, 0.0f, c.data(), 4),
      Error);
}

// Which weights' products read blocked copies (kernels::WeightRead, by a fixed rule): a
// frozen weight's and any weight's read without a graph (generation, evaluation), whose
// values stay for many products; not a weight the graph trains, whose values change after
// one forward and one backward product. The outputs of both within the format's bound of
// each other (the same bits but on AMX).
BOOST_AUTO_TEST_CASE(frozen_and_inference_weights_read_blocked_copies_trained_ones_plain) {
  const bool primitive =
      kernels::bf16_path() == kernels::Bf16Path::kOneDnnNative && kernels::onednn_bf16_kernel().rfind("brg", 0) == 0;
  Generator gen(61);
  const Tensor x = Tensor::randn({16, 256}, gen);  // one product, not split: every operand dense
  const auto copies = [](const Tensor& w) {
    const auto kept = w.node()->bf16_weight.load();
    return kept ? kept->blocked_copies() : std::size_t{0};
  };
  Tensor trained = Tensor::randn({384, 256}, gen).requires_grad_();
  const Tensor frozen = trained.detach().clone();
  // sum |x w| per element, from the unrounded values: (1 + 2^-8)^2 covers the rounded ones.
  const std::vector<double> magnitude =
      matmul(abs(x).to(DType::float64), abs(frozen).to(DType::float64), false, true).to_vector();
  const AutocastGuard bf16(Precision::bfloat16);
  const std::vector<double> in_graph = linear(x, trained).to_vector();
  BOOST_TEST(copies(trained) == 0u, "a trained weight read in a graph: plain");
  const std::vector<double> of_frozen = linear(x, frozen).to_vector();
  BOOST_TEST((copies(frozen) > 0u) == primitive, "a frozen weight: blocked");
  std::vector<double> without_graph;
  {
    const NoGradGuard no_grad;
    without_graph = linear(x, trained).to_vector();
  }
  BOOST_TEST((copies(trained) > 0u) == primitive, "a trained weight read without a graph: blocked");
  BOOST_TEST((without_graph == of_frozen));
  for (std::size_t i = 0; i < in_graph.size(); ++i)  // each within (k + 2) u32 of the exact sum: 2x apart
    BOOST_TEST(std::abs(in_graph[i] - of_frozen[i]) <= 2.0 * (256 + 2) * kU32 * 1.01 * magnitude[i], "element " << i);
}

// linear and matmul keep a parameter's rounding with it (matmul: a 2-D B, as a tied
// embedding's logits read it): the same bits as a weight that is not a leaf (rounded for
// the call), forward and backward, and never a stale rounding after the values change (in
// place, by set_data, by an optimizer step).
BOOST_AUTO_TEST_CASE(linear_and_matmul_reuse_a_weights_rounding_until_it_changes) {
  for (const bool as_matmul : {false, true}) {
    Generator gen(31);
    Tensor x = Tensor::randn({6, 50, 40}, gen).requires_grad_();
    Tensor w = Tensor::randn({70, 40}, gen).requires_grad_();
    const Tensor bias = Tensor::randn({70}, gen), seed = Tensor::randn({6, 50, 70}, gen);
    // y, dx and dW in bf16, the weight given as is or as a product (not a leaf).
    const auto run = [&](bool as_leaf) {
      x.zero_grad();
      w.zero_grad();
      Tensor y;
      {
        const AutocastGuard bf16(Precision::bfloat16);
        const Tensor weight = as_leaf ? w : w * 1.0;
        y = as_matmul ? matmul(x, weight, false, true) : linear(x, weight, bias);
      }
      y.backward(seed);
      return std::array<std::vector<double>, 3>{y.to_vector(), x.grad().to_vector(), w.grad().to_vector()};
    };
    const char* op = as_matmul ? "matmul" : "linear";
    const auto check_fresh = [&](const char* after) {
      const auto leaf = run(true), leaf_again = run(true), computed = run(false);
      for (std::size_t i = 0; i < 3; ++i) {
        BOOST_TEST((leaf[i] == computed[i]), op << ", " << after << ": output " << i);
        BOOST_TEST((leaf_again[i] == computed[i]), op << ", " << after << ": output " << i << ", the rounding reused");
      }
      return leaf[0];
    };
    const std::vector<double> first = check_fresh("first use");
    for (float *v = w.data<float>(), *end = v + w.numel(); v != end; ++v) *v *= 1.5f;
    const std::vector<double> scaled = check_fresh("changed in place");
    BOOST_TEST((scaled != first), op);
    w.set_data(Tensor::randn({70, 40}, gen));
    check_fresh("set_data");
    optim::SGD sgd({{"w", w}}, {.lr = 0.1});
    const std::vector<double> before = run(true)[0];  // and w's gradient for the step
    sgd.step();
    BOOST_TEST((check_fresh("an optimizer step") != before), op);
  }
}

// Under bf16 autocast a fused linear (linear_relu, linear_gelu) keeps its output's
// rounding, made as it wrote the output, for the linear that reads it next: that linear
// gives the same values and weight gradient as on a copy of the output (rounded afresh);
// once the output is changed in place (through another handle: its version count is
// shared), the kept rounding is stale and the next linear reads the new values.
BOOST_AUTO_TEST_CASE(a_fused_linears_kept_rounding_serves_the_next_linear_until_changed) {
  using Fused = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, Fused>> ops = {
      {"linear_relu", [](const Tensor& x, const Tensor& w, const Tensor& b) { return linear_relu(x, w, b); }},
      {"linear_gelu", [](const Tensor& x, const Tensor& w, const Tensor& b) { return linear_gelu(x, w, b); }},
      {"linear_gelu tanh",
       [](const Tensor& x, const Tensor& w, const Tensor& b) { return linear_gelu(x, w, b, true); }},
  };
  for (const auto& [name, fused] : ops) {
    Generator gen(33);
    const Tensor x = Tensor::randn({300, 24}, gen), w1 = Tensor::randn({48, 24}, gen), b1 = Tensor::randn({48}, gen);
    Tensor w2 = Tensor::randn({16, 48}, gen).requires_grad_();
    const AutocastGuard bf16(Precision::bfloat16);
    const auto next_linear = [&](const Tensor& hidden) {
      w2.zero_grad();
      const Tensor y = linear(hidden, w2);
      sum(y).backward();
      return std::array<std::vector<double>, 2>{y.to_vector(), w2.grad().to_vector()};
    };
    const Tensor hidden = fused(x, w1, b1);
    BOOST_TEST((hidden.node()->bf16_weight.load() != nullptr), name << " keeps its output's rounding");
    BOOST_TEST((next_linear(hidden) == next_linear(hidden.detach().clone())), name);
    // Times 1 + 2^-10, which no bf16 rounding absorbs: a stale rounding gives other values.
    const std::vector<double> before = next_linear(hidden)[0];
    Tensor handle = hidden.detach();
    for (float *v = handle.data<float>(), *end = v + handle.numel(); v != end; ++v) *v *= 1.0f + 0x1p-10f;
    const auto changed = next_linear(hidden);
    BOOST_TEST((changed == next_linear(hidden.detach().clone())), name << ", changed in place");
    BOOST_TEST((changed[0] != before), name << ", changed in place");
  }
}

// An optimizer's update remakes a parameter's kept bf16 rounding as it writes the new
// values (Bf16RoundingRefresh): after each step the weight keeps the rounding of its values
// as they are, bit for bit what a product's own rounding gives, and the next products read
// it; for SGD and Adam(W), clipping folded in, on 1 and 3 threads. A weight not read in bf16
// since its last change, or float64, gets none.
BOOST_AUTO_TEST_CASE(an_update_remakes_the_kept_rounding_as_it_writes) {
  const int threads_before = num_threads();
  using Make = std::function<std::unique_ptr<optim::Optimizer>(const optim::NamedParameters&)>;
  const std::vector<std::pair<const char*, Make>> optimizers = {
      {"SGD momentum",
       [](const auto& ps) { return std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 0.1, .momentum = 0.9}); }},
      {"Adam", [](const auto& ps) { return std::make_unique<optim::Adam>(ps, optim::AdamOptions{.lr = 0.01}); }},
      {"AdamW", [](const auto& ps) { return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 0.01}); }}};
  const auto kept_rounding = [](const Tensor& w) { return w.node()->bf16_weight.load(); };
  const auto current = [](const Tensor& w, const kernels::Bf16Weight& kept) {
    return kept.made_from(std::as_const(w).data<float>(), w.shape()[0], w.shape()[1], w.node()->version->load());
  };
  for (const int threads : {1, 3})
    for (const auto& [name, make] : optimizers) {
      set_num_threads(threads);
      Generator gen(53);
      Tensor w = Tensor::randn({130, 200}, gen).requires_grad_();  // 26,000 elements: two chunks
      const Tensor x = Tensor::randn({12, 200}, gen), seed = Tensor::randn({12, 130}, gen);
      const std::unique_ptr<optim::Optimizer> opt = make({{"w", w}});
      const std::string what = std::string(name) + ", " + std::to_string(threads) + " threads";
      for (int step = 0; step < 3; ++step) {
        opt->zero_grad();
        Tensor y, y_fresh;
        {
          const AutocastGuard bf16(Precision::bfloat16);
          y = linear(x, w);
          y_fresh = linear(x, w * 1.0);  // not a leaf: rounded for this call
        }
        BOOST_TEST((y.to_vector() == y_fresh.to_vector()), what << ", step " << step << ": the product reads it");
        y.backward(seed);
        const auto read = kept_rounding(w);
        opt->step(optim::grad_norm_clip({w}, 0.5).factor);
        const auto kept = kept_rounding(w);
        BOOST_REQUIRE_MESSAGE(kept && kept != read && current(w, *kept), what << ", step " << step);
        std::vector<bfloat16> expected(w.numel());
        round_to_bfloat16(std::as_const(w).data<float>(), 1, w.numel(), w.numel(), expected.data());
        BOOST_TEST(std::equal(expected.begin(), expected.end(), kept->data(),
                              [](bfloat16 a, bfloat16 b) { return a.bits == b.bits; }),
                   what << ", step " << step << ": the rounding of the new values");
      }
      // Changed since it was last read in bf16: the update leaves it to the next product.
      w.data<float>()[0] += 1.0f;
      opt->step();
      const auto stale = kept_rounding(w);
      BOOST_TEST((stale && !current(w, *stale)), what << ": a stale rounding is not remade");
    }
  set_num_threads(threads_before);
  // Never read in bf16, or float64: nothing kept, nothing made.
  for (const DType dtype : {DType::float32, DType::float64}) {
    Generator gen(54);
    Tensor w = Tensor::randn({20, 30}, gen).to(dtype).requires_grad_();
    optim::AdamW opt({{"w", w}});
    {
      const AutocastGuard bf16(Precision::bfloat16);
      sum(linear(Tensor::randn({4, 30}, gen).to(dtype), dtype == DType::float32 ? w * 1.0 : w)).backward();
    }
    opt.step();
    BOOST_TEST(!kept_rounding(w), dtype_name(dtype));
  }
}

// A layer's weights replaced by load_state_dict: its next bf16 forward reads the new ones
// (the same bits as a layer made with them), not the rounding kept from before.
BOOST_AUTO_TEST_CASE(a_loaded_state_replaces_the_kept_rounding) {
  Generator gen(41);
  nn::Linear layer(40, 70), other(40, 70);
  layer.reset_parameters(gen);
  other.reset_parameters(gen);
  const Tensor x = Tensor::randn({8, 40}, gen);
  const AutocastGuard bf16(Precision::bfloat16);
  const std::vector<double> before = layer.forward(x).to_vector();
  layer.load_state_dict(other.state_dict());
  const std::vector<double> loaded = layer.forward(x).to_vector(), expected = other.forward(x).to_vector();
  BOOST_TEST((loaded == expected));
  BOOST_TEST((loaded != before));
}

namespace {

// A float32 tensor whose values bf16 represents exactly (so that rounding it changes
// nothing), and its float64 copy.
Tensor representable(Shape shape, std::uint64_t seed, bool requires_grad = true) {
  Generator gen(seed);
  std::vector<double> values = Tensor::randn(shape, gen).to_vector();
  for (double& v : values) v = round_trip(static_cast<float>(v));
  return Tensor::from_vector(values, std::move(shape), DType::float32, requires_grad);
}

// |got - exact| within (k + 2) u32 of the magnitudes: each magnitude taken from the same
// computation on absolute values in float64.
void check_within(const Tensor& got, const Tensor& exact, const Tensor& magnitude, std::size_t k, const char* what) {
  const std::vector<double> g = got.to_vector(), e = exact.to_vector(), s = magnitude.to_vector();
  BOOST_REQUIRE_EQUAL(g.size(), e.size());
  for (std::size_t i = 0; i < g.size(); ++i)
    BOOST_TEST(std::abs(g[i] - e[i]) <= static_cast<double>(k + 2) * kU32 * s[i] + 1e-30, what << " element " << i);
}

}  // namespace

// linear and matmul inside the guard: forward and every gradient within the bounds of
// float64 on the same (bf16-exact) values; a seed of bf16-exact values keeps dY exact too.
BOOST_AUTO_TEST_CASE(autocast_linear_and_matmul_forward_and_backward) {
  const std::size_t rows = 96, in = 70, out = 50;
  const Tensor x = representable({4, 24, in}, 11), w = representable({out, in}, 12), bias = representable({out}, 13);
  const Tensor seed = representable({4, 24, out}, 14, false);
  Tensor y;
  {
    const AutocastGuard bf16(Precision::bfloat16);
    y = linear(x, w, bias);
  }
  y.backward(seed);
  const Tensor x64 = x.detach().to(DType::float64), w64 = w.detach().to(DType::float64);
  const Tensor b64 = bias.detach().to(DType::float64), s64 = seed.to(DType::float64);
  check_within(y, linear(x64, w64, b64), linear(abs(x64), abs(w64), abs(b64)), in, "linear forward");
  check_within(x.grad(), matmul(s64, w64), matmul(abs(s64), abs(w64)), out, "linear dx");
  check_within(w.grad(), matmul(reshape(s64, Shape{rows, out}), reshape(x64, Shape{rows, in}), true, false),
               matmul(reshape(abs(s64), Shape{rows, out}), reshape(abs(x64), Shape{rows, in}), true, false), rows,
               "linear dW");
  check_within(bias.grad(), sum(reshape(s64, Shape{rows, out}), {0}), sum(reshape(abs(s64), Shape{rows, out}), {0}),
               rows, "linear db");

  const Tensor a = representable({3, 40, 30}, 15), b = representable({30, 20}, 16);
  const Tensor mseed = representable({3, 40, 20}, 17, false);
  Tensor c;
  {
    const AutocastGuard bf16(Precision::bfloat16);
    c = matmul(a, b);
  }
  c.backward(mseed);
  const Tensor a64 = a.detach().to(DType::float64), bm64 = b.detach().to(DType::float64);
  const Tensor ms64 = mseed.to(DType::float64);
  check_within(c, matmul(a64, bm64), matmul(abs(a64), abs(bm64)), 30, "matmul forward");
  check_within(a.grad(), matmul(ms64, bm64, false, true), matmul(abs(ms64), abs(bm64), false, true), 20, "matmul dA");
  check_within(b.grad(), matmul(reshape(a64, {120, 30}), reshape(ms64, {120, 20}), true, false),
               matmul(reshape(abs(a64), {120, 30}), reshape(abs(ms64), {120, 20}), true, false), 120, "matmul dB");
}

// Operands that bf16 does not represent are rounded, in forward and in backward (the
// backward of a product runs in its forward's precision even after the guard is gone);
// outside a guard, and for float64 inside one, nothing changes bit for bit.
BOOST_AUTO_TEST_CASE(autocast_rounds_only_inside_the_guard) {
  Generator gen(21);
  Tensor x = Tensor::randn({64, 48}, gen).requires_grad_(), w = Tensor::randn({32, 48}, gen).requires_grad_();
  const Tensor before = linear(x, w).detach();
  const std::vector<double> outside64 =
      linear(x.detach().to(DType::float64), w.detach().to(DType::float64)).to_vector();
  Tensor inside;
  {
    const AutocastGuard bf16(Precision::bfloat16);
    BOOST_TEST((autocast_precision() == Precision::bfloat16));
    {
      const AutocastGuard nested(Precision::float32);
      BOOST_TEST((linear(x, w).to_vector() == before.to_vector()));
    }
    inside = linear(x, w);
    const Tensor x64 = x.detach().to(DType::float64), w64 = w.detach().to(DType::float64);
    BOOST_TEST((linear(x64, w64).to_vector() == outside64));  // float64 is never rounded
    Precision other_thread = Precision::bfloat16;
    std::thread([&] { other_thread = autocast_precision(); }).join();
    BOOST_TEST((other_thread == Precision::float32));  // the guard is the calling thread's
  }
  BOOST_TEST((autocast_precision() == Precision::float32));
  BOOST_TEST((linear(x, w).to_vector() == before.to_vector()));
  BOOST_TEST((inside.to_vector() != before.to_vector()));
  // Expected: the same product on operands rounded by hand, in bf16 kernels.
  std::vector<double> xr = x.to_vector(), wr = w.to_vector();
  for (double& v : xr) v = round_trip(static_cast<float>(v));
  for (double& v : wr) v = round_trip(static_cast<float>(v));
  const Tensor xr32 = Tensor::from_vector(xr, {64, 48}), wr32 = Tensor::from_vector(wr, {32, 48});
  {
    const AutocastGuard bf16(Precision::bfloat16);
    BOOST_TEST((linear(xr32, wr32).to_vector() == inside.to_vector()));  // rounding twice changes nothing
  }
  // Backward outside the guard, in bf16 all the same: equal to one run inside it.
  const Tensor seed = Tensor::randn({64, 32}, gen);
  inside.backward(seed);
  const Tensor dx_outside = x.grad().clone(), dw_outside = w.grad().clone();
  x.zero_grad();
  w.zero_grad();
  {
    const AutocastGuard bf16(Precision::bfloat16);
    linear(x, w).backward(seed);
  }
  BOOST_TEST((x.grad().to_vector() == dx_outside.to_vector()));
  BOOST_TEST((w.grad().to_vector() == dw_outside.to_vector()));
  x.zero_grad();
  w.zero_grad();
  linear(x, w).backward(seed);
  BOOST_TEST((x.grad().to_vector() != dx_outside.to_vector()));  // float32's gradients differ
}

namespace {

// Attention in float64 on given float32 tensors, q [B, Lq, d], k and v [B / group, Lk, d]
// (entry b reading k and v's entry b / group): the probabilities and the output.
struct Attended {
  std::vector<double> probs, out;  // [B, Lq, Lk], [B, Lq, dv]
};

Attended attend64(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                  std::size_t batches, std::size_t group, std::size_t lq, std::size_t lk, std::size_t d,
                  bool causal = false) {
  Attended a{std::vector<double>(batches * lq * lk), std::vector<double>(batches * lq * d)};
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (std::size_t b = 0; b < batches; ++b)
    for (std::size_t i = 0; i < lq; ++i) {
      const std::size_t e = b / group;
      double* p = a.probs.data() + (b * lq + i) * lk;
      double top = -INFINITY, total = 0;
      for (std::size_t j = 0; j < lk; ++j) {
        double s = 0;
        for (std::size_t c = 0; c < d; ++c) s += q[(b * lq + i) * d + c] * k[(e * lk + j) * d + c];
        p[j] = causal && j > i ? -INFINITY : s * scale;  // causal: key j > query i hidden
        top = std::max(top, p[j]);
      }
      for (std::size_t j = 0; j < lk; ++j) total += (p[j] = std::exp(p[j] - top));
      for (std::size_t j = 0; j < lk; ++j) p[j] /= total;
      for (std::size_t c = 0; c < d; ++c) {
        double o = 0;
        for (std::size_t j = 0; j < lk; ++j) o += p[j] * v[(e * lk + j) * d + c];
        a.out[(b * lq + i) * d + c] = o;
      }
    }
  return a;
}

// Attention's results in bf16 {out, dq, dk, dv} (shapes as attend64's, the output's
// gradient g) against float64 on the unrounded inputs, within the bounds of the test
// below. Rounding q and k moves each score s = scale q.k by at most delta = (2 u16 +
// u16^2) scale sum |q_c k_c|, so each probability by a factor within e^(+-2 delta_max) of
// its row; the probabilities are rounded (u16) before P V, v too (u16), and the float32
// sums add (terms + 2) u32. So |out - exact| <= ((1 + u16)^2 e^(2 delta_max) - 1 +
// (lk + 2) u32) sum_j p_j |v_j|. dV_j = sum_(i, b of the group) p_bij dO_bi has the same
// structure, with dO's rounding in place of v's, group x lq terms, and every
// probability moved by at most the group's largest delta.
void check_attention_within_bounds(const std::vector<std::vector<double>>& bf16, const std::vector<double>& qv,
                                   const std::vector<double>& kv, const std::vector<double>& vv,
                                   const std::vector<double>& g, std::size_t batches, std::size_t group, std::size_t lq,
                                   std::size_t lk, std::size_t d, bool causal = false) {
  const Attended exact = attend64(qv, kv, vv, batches, group, lq, lk, d, causal);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d)), term = 2 * kU16 + kU16 * kU16;
  const auto factor = [](double delta, std::size_t terms) {
    return (1 + kU16) * (1 + kU16) * std::exp(2 * delta) - 1 + static_cast<double>(terms + 2) * kU32;
  };
  std::vector<double> row_delta(batches * lq, 0.0);  // the largest score move of each query row
  for (std::size_t b = 0; b < batches; ++b)
    for (std::size_t i = 0; i < lq; ++i)
      for (std::size_t j = 0; j < (causal ? std::min(lk, i + 1) : lk); ++j) {  // the keys row i sees
        double magnitude = 0;
        for (std::size_t c = 0; c < d; ++c)
          magnitude += std::abs(qv[(b * lq + i) * d + c] * kv[(b / group * lk + j) * d + c]);
        row_delta[b * lq + i] = std::max(row_delta[b * lq + i], term * scale * magnitude);
      }
  for (std::size_t b = 0; b < batches; ++b)
    for (std::size_t i = 0; i < lq; ++i)
      for (std::size_t c = 0; c < d; ++c) {
        double magnitude = 0;
        for (std::size_t j = 0; j < lk; ++j)
          magnitude += exact.probs[(b * lq + i) * lk + j] * std::abs(vv[(b / group * lk + j) * d + c]);
        const std::size_t at = (b * lq + i) * d + c;
        BOOST_TEST(std::abs(bf16[0][at] - exact.out[at]) <= factor(row_delta[b * lq + i], lk) * magnitude,
                   "out " << at);
      }
  for (std::size_t e = 0; e < batches / group; ++e) {
    const auto rows = row_delta.begin() + static_cast<std::ptrdiff_t>(e * group * lq);
    const double group_delta = *std::max_element(rows, rows + static_cast<std::ptrdiff_t>(group * lq));
    for (std::size_t j = 0; j < lk; ++j)
      for (std::size_t c = 0; c < d; ++c) {
        double dv = 0, magnitude = 0;
        for (std::size_t b = e * group; b < (e + 1) * group; ++b)
          for (std::size_t i = 0; i < lq; ++i) {
            const double p = exact.probs[(b * lq + i) * lk + j], dout = g[(b * lq + i) * d + c];
            dv += p * dout;
            magnitude += p * std::abs(dout);
          }
        const std::size_t at = (e * lk + j) * d + c;
        BOOST_TEST(std::abs(bf16[3][at] - dv) <= factor(group_delta, group * lq) * magnitude, "dv " << at);
      }
  }
}

// Attention under autocast, {out, dq, dk, dv} in the given precision on 1 thread, after
// checking that 3 threads give the same bits and that bf16 differs from float32.
std::vector<std::vector<double>> autocast_attention(Tensor& q, Tensor& k, Tensor& v, const Tensor& seed,
                                                    const AttentionOptions& options) {
  const auto run = [&](Precision precision) {
    q.zero_grad(), k.zero_grad(), v.zero_grad();
    AttentionOptions run_options = options;
    Generator dropout_seeds(99);  // every run drops the same probabilities
    run_options.generator = &dropout_seeds;
    Tensor out;
    {
      const AutocastGuard autocast(precision);
      out = scaled_dot_product_attention(q, k, v, run_options).output;
    }
    out.backward(seed);
    return std::vector<std::vector<double>>{out.to_vector(), q.grad().to_vector(), k.grad().to_vector(),
                                            v.grad().to_vector()};
  };
  const int threads = num_threads();
  set_num_threads(1);
  const auto bf16 = run(Precision::bfloat16);
  set_num_threads(3);
  BOOST_TEST((run(Precision::bfloat16) == bf16), "attention in bf16 on 3 threads");
  set_num_threads(threads);
  const auto f32 = run(Precision::float32);
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_TEST((bf16[i] != f32[i]), "bf16 result " << i << " is float32's");
    // Norm-wise against float32 (dQ and dK included, which the element bounds do not
    // cover): each term of a result passes through at most six bf16 roundings (Q, K, P or
    // dS, dO, V, each 2^-8 relative), so one sign's terms move by at most 6 2^-8; allowed
    // 8 2^-8 of the norm. A block read in the wrong layout is off by the norm itself.
    double diff = 0, norm = 0;
    for (std::size_t j = 0; j < f32[i].size(); ++j) {
      diff += (bf16[i][j] - f32[i][j]) * (bf16[i][j] - f32[i][j]);
      norm += f32[i][j] * f32[i][j];
    }
    BOOST_TEST(std::sqrt(diff) <= 8 * kU16 * std::sqrt(norm), "bf16 result " << i << " against float32, norm-wise");
  }
  return bf16;
}

// Random q [n, heads, lq, d], k and v [n, kv_heads, lk, d] (requiring gradients) and the
// output's gradient.
struct AttentionInputs {
  Tensor q, k, v, seed;
  AttentionInputs(std::size_t n, std::size_t heads, std::size_t kv_heads, std::size_t lq, std::size_t lk, std::size_t d,
                  Generator& gen)
      : q(Tensor::randn({n, heads, lq, d}, gen).requires_grad_()),
        k(Tensor::randn({n, kv_heads, lk, d}, gen).requires_grad_()),
        v(Tensor::randn({n, kv_heads, lk, d}, gen).requires_grad_()),
        seed(Tensor::randn({n, heads, lq, d}, gen)) {}
};

}  // namespace

// Attention's block products in bf16: output and dV within the bounds derived from the
// format (check_attention_within_bounds); backward runs in bf16 too, and every result
// gives the same bits on any thread count.
BOOST_AUTO_TEST_CASE(autocast_attention_blocks_within_the_format_bounds) {
  const std::size_t batches = 3, lq = 150, lk = 140, d = 16;  // more than one 128-block each way
  Generator gen(31);
  Tensor q = Tensor::randn({batches, lq, d}, gen).requires_grad_();
  Tensor k = Tensor::randn({batches, lk, d}, gen).requires_grad_();
  Tensor v = Tensor::randn({batches, lk, d}, gen).requires_grad_();
  const Tensor seed = Tensor::randn({batches, lq, d}, gen);
  const auto bf16 = autocast_attention(q, k, v, seed, {});
  check_attention_within_bounds(bf16, q.to_vector(), k.to_vector(), v.to_vector(), seed.to_vector(), batches, 1, lq, lk,
                                d);
}

// Causal attention in bf16 over several query and key blocks (128 queries, 256 keys a
// block): no block of scores is computed past its last query's keys (the first query
// block's keys stop at 128, the first key block's dK and dV rows past them are left to
// later query blocks), with grouped-query heads and more keys than queries (the last keys
// seen by none).
BOOST_AUTO_TEST_CASE(autocast_causal_attention_blocks_within_the_format_bounds) {
  for (const auto& [lq, lk] : std::vector<std::pair<std::size_t, std::size_t>>{{300, 300}, {280, 330}}) {
    const std::size_t heads = 2, kv_heads = 1, d = 16;
    Generator gen(33);
    Tensor q = Tensor::randn({1, heads, lq, d}, gen).requires_grad_();
    Tensor k = Tensor::randn({1, kv_heads, lk, d}, gen).requires_grad_();
    Tensor v = Tensor::randn({1, kv_heads, lk, d}, gen).requires_grad_();
    const Tensor seed = Tensor::randn({1, heads, lq, d}, gen);
    AttentionOptions options;
    options.is_causal = true;
    options.enable_gqa = true;
    const auto bf16 = autocast_attention(q, k, v, seed, options);
    check_attention_within_bounds(bf16, q.to_vector(), k.to_vector(), v.to_vector(), seed.to_vector(), heads,
                                  heads / kv_heads, lq, lk, d, /*causal=*/true);
    const std::vector<double>& dk = bf16[2];
    for (std::size_t j = lq; j < lk; ++j)
      for (std::size_t c = 0; c < d; ++c) BOOST_TEST(dk[j * d + c] == 0.0, "dk of unseen key " << j);
  }
}

// Grouped-query attention in bf16: 4 query heads on 2 K/V heads, read in place; dV sums
// both query heads of its group (the bound over group x lq terms).
BOOST_AUTO_TEST_CASE(autocast_grouped_query_attention_within_the_format_bounds) {
  const std::size_t n = 2, heads = 4, kv_heads = 2, lq = 150, lk = 140, d = 16;
  Generator gen(32);
  auto [q, k, v, seed] = AttentionInputs(n, heads, kv_heads, lq, lk, d, gen);
  AttentionOptions options;
  options.enable_gqa = true;
  const auto bf16 = autocast_attention(q, k, v, seed, options);
  check_attention_within_bounds(bf16, q.to_vector(), k.to_vector(), v.to_vector(), seed.to_vector(), n * heads,
                                heads / kv_heads, lq, lk, d);
}

// Short sequences (one block of scores an entry) run in bundles of entries, each block
// product one call over the bundle (kernels/attention.cpp): within the same bounds and the
// same bits on any thread count, for batches that leave a partial bundle, a single query,
// the largest one-block shape, more keys than queries and fewer, causal (keys no query
// sees get zero gradients) and grouped-query heads.
BOOST_AUTO_TEST_CASE(autocast_attention_in_bundles_within_the_format_bounds) {
  struct Case {
    std::size_t n, heads, kv_heads, lq, lk, d;
    bool causal;
  };
  for (const Case& c : std::vector<Case>{{5, 4, 4, 64, 64, 16, false},
                                         {3, 3, 3, 1, 3, 8, false},
                                         {1, 3, 3, 128, 256, 16, false},
                                         {7, 2, 2, 40, 70, 16, true},
                                         {2, 4, 2, 30, 20, 16, true},
                                         {3, 4, 1, 33, 33, 8, false}}) {
    BOOST_TEST_CONTEXT("n " << c.n << ", heads " << c.heads << "/" << c.kv_heads << ", lq " << c.lq << ", lk " << c.lk
                            << (c.causal ? ", causal" : "")) {
      Generator gen(41);
      auto [q, k, v, seed] = AttentionInputs(c.n, c.heads, c.kv_heads, c.lq, c.lk, c.d, gen);
      AttentionOptions options;
      options.is_causal = c.causal;
      options.enable_gqa = c.heads != c.kv_heads;
      const auto bf16 = autocast_attention(q, k, v, seed, options);
      check_attention_within_bounds(bf16, q.to_vector(), k.to_vector(), v.to_vector(), seed.to_vector(), c.n * c.heads,
                                    c.heads / c.kv_heads, c.lq, c.lk, c.d, c.causal);
      if (c.causal)
        for (std::size_t e = 0; e < c.n * c.kv_heads; ++e)
          for (std::size_t j = c.lq; j < c.lk; ++j)
            for (std::size_t x = 0; x < c.d; ++x) {
              BOOST_TEST(bf16[2][(e * c.lk + j) * c.d + x] == 0.0, "dk of unseen key " << j);
              BOOST_TEST(bf16[3][(e * c.lk + j) * c.d + x] == 0.0, "dv of unseen key " << j);
            }
    }
  }
}

// ... and with a mask broadcast over the batch (one row hiding every key), an additive
// bias and dropout: against float32 under the same dropout, on any thread count; the hidden
// row's output and query gradient zero.
BOOST_AUTO_TEST_CASE(autocast_attention_in_bundles_with_masks_and_dropout) {
  const std::size_t n = 3, heads = 5, lq = 24, lk = 40, d = 16, hidden_row = 6;
  Generator gen(42);
  auto [q, k, v, seed] = AttentionInputs(n, heads, heads, lq, lk, d, gen);
  const std::vector<double> draws = Tensor::uniform({lq * lk}, 0.0, 1.0, gen).to_vector();
  std::vector<double> keep(lq * lk);
  for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = i / lk != hidden_row && draws[i] < 0.7;
  AttentionOptions options;
  options.mask = Tensor::from_vector(keep, {lq, lk});
  options.additive_mask = Tensor::randn({heads, 1, lk}, gen);
  options.dropout_p = 0.2;
  const auto bf16 = autocast_attention(q, k, v, seed, options);
  if (kernels::bf16_path() == kernels::Bf16Path::kOneDnnNative) {  // the bundles ran as oneDNN's batched calls
    Profiler profiler;
    {
      const AutocastGuard autocast(Precision::bfloat16);
      scaled_dot_product_attention(q, k, v, options);
    }
    profiler.stop();
    std::size_t batched_calls = 0;
    for (const profile::ThreadLog& t : profiler.threads())
      for (const profile::Event& e : t.events)
        batched_calls += e.name && e.name == std::string_view("bf16 batched matmul (oneDNN primitive)");
    BOOST_TEST(batched_calls > 0u);
  }
  for (std::size_t e = 0; e < n * heads; ++e)
    for (std::size_t x = 0; x < d; ++x) {
      BOOST_TEST(bf16[0][(e * lq + hidden_row) * d + x] == 0.0, "out of the hidden row, entry " << e);
      BOOST_TEST(bf16[1][(e * lq + hidden_row) * d + x] == 0.0, "dq of the hidden row, entry " << e);
    }
}

// ... and with values of width 0 (dv = 0, allowed): an empty output, no gradient into q
// and k, nothing asked of oneDNN for the empty products.
BOOST_AUTO_TEST_CASE(autocast_attention_in_bundles_with_empty_values) {
  Generator gen(43);
  Tensor q = Tensor::randn({2, 3, 8, 4}, gen).requires_grad_();
  Tensor k = Tensor::randn({2, 3, 8, 4}, gen).requires_grad_();
  Tensor v = Tensor::zeros({2, 3, 8, 0}).requires_grad_();
  Tensor out;
  {
    const AutocastGuard autocast(Precision::bfloat16);
    out = scaled_dot_product_attention(q, k, v).output;
  }
  BOOST_TEST((out.shape() == Shape{2, 3, 8, 0}));
  out.backward(Tensor::zeros({2, 3, 8, 0}));
  for (const Tensor* input : {&q, &k}) {
    const std::vector<double> grad = input->grad().to_vector();
    BOOST_TEST(std::all_of(grad.begin(), grad.end(), [](double x) { return x == 0.0; }));
  }
}

// Many small products of one shape in one call (attention's blocks at short sequences):
// each within the bound of its own float64 product, and each the same bits alone as in the
// batch, on every path (oneDNN's primitive; gemm's product for each elsewhere).
BOOST_AUTO_TEST_CASE(batched_products_do_not_depend_on_their_batch) {
  constexpr std::size_t kBatch = 9, kGap = 5;  // elements between one product's operands and the next's
  for (const auto& [m, n, k] :
       std::vector<std::array<std::size_t, 3>>{{64, 64, 32}, {16, 16, 16}, {128, 256, 64}, {1, 7, 3}})
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const float beta : {0.0f, 1.0f}) {
          const std::size_t stride_a = m * k + kGap, stride_b = k * n + kGap, stride_c = m * n + kGap;
          const std::size_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
          const std::vector<float> a = random_floats(kBatch * stride_a, 21), b = random_floats(kBatch * stride_b, 22),
                                   c0 = random_floats(kBatch * stride_c, 23);
          std::vector<bfloat16> ab(a.size()), bb(b.size());
          kernels::round_to_bfloat16(a.data(), 1, a.size(), a.size(), ab.data());
          kernels::round_to_bfloat16(b.data(), 1, b.size(), b.size(), bb.data());
          const float alpha = 0.25f;
          std::vector<float> batched = c0;
          kernels::batched_gemm(kBatch, trans_a, trans_b, m, n, k, alpha, ab.data(), lda, stride_a, bb.data(), ldb,
                                stride_b, beta, batched.data(), n, stride_c);
          const auto what = [&](std::size_t i) {
            return std::to_string(m) + " x " + std::to_string(k) + " x " + std::to_string(n) + " trans " +
                   std::to_string(trans_a) + std::to_string(trans_b) + " beta " + std::to_string(beta) + ", product " +
                   std::to_string(i);
          };
          for (std::size_t i = 0; i < kBatch; ++i) {
            std::vector<float> alone(c0.begin() + static_cast<std::ptrdiff_t>(i * stride_c),
                                     c0.begin() + static_cast<std::ptrdiff_t>(i * stride_c + m * n));
            kernels::batched_gemm(1, trans_a, trans_b, m, n, k, alpha, ab.data() + i * stride_a, lda, 0,
                                  bb.data() + i * stride_b, ldb, 0, beta, alone.data(), n, 0);
            const auto in_batch = batched.begin() + static_cast<std::ptrdiff_t>(i * stride_c);
            BOOST_TEST(std::equal(alone.begin(), alone.end(), in_batch), what(i) << ": alone as in the batch");
            std::vector<double> a_rounded(m * k), b_rounded(k * n), exact, scale;
            for (std::size_t x = 0; x < m * k; ++x) a_rounded[x] = kernels::to_float(ab[i * stride_a + x]);
            for (std::size_t x = 0; x < k * n; ++x) b_rounded[x] = kernels::to_float(bb[i * stride_b + x]);
            reference({trans_a, trans_b, m, n, k}, alpha, a_rounded, b_rounded, beta,
                      std::vector<double>(c0.begin() + static_cast<std::ptrdiff_t>(i * stride_c),
                                          c0.begin() + static_cast<std::ptrdiff_t>(i * stride_c + m * n)),
                      exact, scale);
            std::size_t outside = 0;
            for (std::size_t x = 0; x < m * n; ++x)
              outside += std::abs(alone[x] - exact[x]) > static_cast<double>(k + 2) * kU32 * scale[x];
            BOOST_TEST(outside == 0u, what(i) << ": within the bound");
            if (i + 1 < kBatch)  // the gap between two products' C untouched
              BOOST_TEST(std::equal(in_batch + static_cast<std::ptrdiff_t>(m * n),
                                    in_batch + static_cast<std::ptrdiff_t>(stride_c),
                                    c0.begin() + static_cast<std::ptrdiff_t>(i * stride_c + m * n)),
                         what(i) << ": the gap after it");
          }
        }
}
