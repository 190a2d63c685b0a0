#define BOOST_TEST_MODULE rope
// Rotary position embedding (rope): the rotate-half formula written out element by
// element, gradients, offsets against longer sequences, heads read in place from a fused
// QKV tensor, float32 within its rounding, thread counts, bad input.
#include "helpers.hpp"

#include <cmath>
#include <limits>

#include "xgrad/autograd/parallel.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

namespace {

RopeOptions options(double theta, std::size_t offset, std::size_t rotary_dim = 0) {
  RopeOptions o;
  o.theta = theta;
  o.offset = offset;
  o.rotary_dim = rotary_dim;
  return o;
}

// The formula in double, as Hugging Face's Llama writes it (inv_freq = 1 / theta^(2i / r),
// or the frequencies given; rotate_half): x holds rows of `stride` values, row r at position offset + r % length,
// and `heads` heads of d columns from column `begin`; the result is dense [rows, heads * d].
std::vector<double> reference(const std::vector<double>& x, std::size_t stride, std::size_t begin, std::size_t length,
                              std::size_t heads, std::size_t d, const RopeOptions& o) {
  const std::size_t r = o.rotary_dim ? o.rotary_dim : d, h = r / 2, rows = x.size() / stride;
  std::vector<double> out(rows * heads * d);
  for (std::size_t row = 0; row < rows; ++row)
    for (std::size_t head = 0; head < heads; ++head) {
      const double* in = x.data() + row * stride + begin + head * d;
      double* y = out.data() + (row * heads + head) * d;
      const double p = static_cast<double>(o.offset + row % length);
      for (std::size_t j = 0; j < d; ++j) {
        if (j >= r) {
          y[j] = in[j];
          continue;
        }
        const std::size_t i = j % h;
        const double angle = o.frequencies.empty()
                                 ? p / std::pow(o.theta, 2.0 * static_cast<double>(i) / static_cast<double>(r))
                                 : p * o.frequencies[i];
        y[j] = j < h ? in[j] * std::cos(angle) - in[j + h] * std::sin(angle)
                     : in[j] * std::cos(angle) + in[j - h] * std::sin(angle);
      }
    }
  return out;
}

// [N, L, H * d] -> [N, H, L, d] and back, through plain shape ops.
Tensor split_heads(const Tensor& x, std::size_t heads) {
  const Shape s = x.shape();
  const auto i = [](std::size_t v) { return static_cast<std::int64_t>(v); };
  return permute(reshape(x, {i(s[0]), i(s[1]), i(heads), i(s[2] / heads)}), {0, 2, 1, 3});
}
Tensor merge_heads(const Tensor& x) {
  const Shape s = x.shape();
  const auto i = [](std::size_t v) { return static_cast<std::int64_t>(v); };
  return reshape(permute(x, {0, 2, 1, 3}), {i(s[0]), i(s[2]), i(s[1] * s[3])});
}

}  // namespace

BOOST_AUTO_TEST_CASE(rope_matches_the_rotate_half_formula) {
  const Tensor x = randn64({2, 3, 5, 8}, 1, false);  // [..., T, D], T odd
  for (double theta : {10000.0, 500000.0, 3.0})
    for (std::size_t offset : {0, 7, 1000})
      for (std::size_t rotary : {0, 4}) {
        const RopeOptions o = options(theta, offset, rotary);
        BOOST_TEST_CONTEXT("theta " << theta << ", offset " << offset << ", rotary_dim " << rotary) {
          check_close(rope(x, o).to_vector(), reference(x.to_vector(), 8, 0, 5, 1, 8, o), 1e-12);
        }
      }
  // Heads in place: three heads of 6 in columns [6, 24) of a [2, 5, 30] tensor.
  const Tensor wide = randn64({2, 5, 30}, 2, false);
  for (std::size_t rotary : {0, 2}) {
    const RopeOptions o = options(100.0, 4, rotary);
    const Tensor y = rope({wide, 6, 18}, 3, o);
    BOOST_CHECK(y.shape() == (Shape{2, 5, 18}));
    check_close(y.to_vector(), reference(wide.to_vector(), 30, 6, 5, 3, 6, o), 1e-12);
  }
  // Frequencies given (a scaled RoPE's): theirs, not theta's; theta's own given are theta's bits.
  for (std::size_t rotary : {0, 4}) {
    RopeOptions o = options(10000.0, 6, rotary);
    o.frequencies = rotary ? std::vector<double>{0.7, 0.0} : std::vector<double>{1.5, 0.25, 1e-3, 0.0};
    check_close(rope(x, o).to_vector(), reference(x.to_vector(), 8, 0, 5, 1, 8, o), 1e-12);
    const RopeOptions plain = options(500.0, 6, rotary);
    RopeOptions same = plain;
    same.frequencies = rope_frequencies(500.0, rotary ? rotary : 8);
    BOOST_CHECK(rope(x, same).to_vector() == rope(x, plain).to_vector());
    BOOST_CHECK(rope(x, o).to_vector() != rope(x, plain).to_vector());
  }
  RopeOptions scaled = options(10000.0, 4);
  scaled.frequencies = {0.9, 0.5, 0.1};
  check_close(rope({wide, 6, 18}, 3, scaled).to_vector(), reference(wide.to_vector(), 30, 6, 5, 3, 6, scaled), 1e-12);
  // The default is Llama's theta 10000 from position 0; width 0 reads to the last column.
  check_close(rope({wide, 12}, 3).to_vector(), reference(wide.to_vector(), 30, 12, 5, 3, 6, {}), 1e-12);
}

BOOST_AUTO_TEST_CASE(rope_gradients) {
  const Tensor x = randn64({2, 5, 6}, 3);  // T odd
  for (double theta : {10000.0, 100.0, 2.5})
    for (std::size_t offset : {0, 3}) {
      const RopeOptions o = options(theta, offset);
      check_gradients([o](const Inputs& in) { return rope(in[0], o); }, {x});
    }
  check_gradients([](const Inputs& in) { return rope(in[0], options(50.0, 2, 2)); }, {x});  // partial rotation
  RopeOptions scaled = options(10000.0, 2);
  scaled.frequencies = {1.3, 0.2, 0.0};  // a scaled RoPE's
  check_gradients([scaled](const Inputs& in) { return rope(in[0], scaled); }, {x});
  // Two ropes into one gradient: the second backward adds into the first's.
  check_gradients([](const Inputs& in) { return rope(in[0]) + rope(in[0], options(10.0, 4)); }, {x});
  // q and k columns of one fused [N, L, 3C] QKV tensor, C = 3 heads of 4, T odd.
  const Tensor qkv = randn64({2, 3, 36}, 4);
  for (std::size_t offset : {0, 5}) {
    const RopeOptions o = options(10000.0, offset);
    check_gradients(
        [o](const Inputs& in) {
          return concat({rope({in[0], 0, 12}, 3, o), rope({in[0], 12, 12}, 3, o)}, 2);
        },
        {qkv});
    check_gradients([o](const Inputs& in) { return rope({in[0], 12, 12}, 3, o); }, {qkv});  // the rest: no gradient
    // Another gradient into the same columns, before or after rope's: added to, never overwritten.
    check_gradients(
        [o](const Inputs& in) {
          return rope({in[0], 12, 12}, 3, o) + slice(in[0], 2, 12, 24) * 2.0;
        },
        {qkv});
    check_gradients(
        [o](const Inputs& in) {
          return slice(in[0], 2, 12, 24) * 2.0 + rope({in[0], 12, 12}, 3, o);
        },
        {qkv});
    check_gradients([o](const Inputs& in) { return rope({in[0]}, 9, options(3.0, 1, 2)); }, {qkv});  // every column
  }
}

BOOST_AUTO_TEST_CASE(rope_on_columns_equals_rope_on_split_heads) {
  // A Llama block turns q and k where the fused projection wrote them; the careful way
  // slices, splits the heads to [N, H, L, d], turns and merges back. The same products:
  // the same bits, values and gradients.
  Tensor qkv = randn64({2, 5, 36}, 5);
  const Tensor w = randn64({2, 5, 12}, 6, false);
  const RopeOptions o = options(500.0, 2);
  const Tensor in_place = rope({qkv, 12, 12}, 3, o);
  sum(in_place * w).backward();
  const std::vector<double> grad_in_place = qkv.grad().to_vector();
  qkv.zero_grad();
  const Tensor careful = merge_heads(rope(split_heads(slice(qkv, 2, 12, 24), 3), o));
  sum(careful * w).backward();
  BOOST_CHECK(in_place.to_vector() == careful.to_vector());
  BOOST_CHECK(grad_in_place == qkv.grad().to_vector());

  // Then attention reads them in place, v straight from qkv, as the composed heads do.
  AttentionOptions causal;
  causal.is_causal = true;
  const Tensor q = rope({qkv, 0, 12}, 3, o), k = rope({qkv, 12, 12}, 3, o);
  const Tensor fused = multi_head_attention({q}, {k}, {qkv, 24, 12}, 3, true, causal).output;
  const Tensor composed = merge_heads(
      scaled_dot_product_attention(split_heads(q, 3), split_heads(k, 3), split_heads(slice(qkv, 2, 24, 36), 3), causal)
          .output);
  check_close(fused.to_vector(), composed.to_vector(), 1e-12);
}

BOOST_AUTO_TEST_CASE(rope_with_an_offset_continues_a_longer_sequence) {
  // Cached generation turns rows k.. with offset k: exactly the rows of the whole pass,
  // since each angle comes from its position alone.
  const Tensor x = randn64({2, 9, 8}, 7, false), qkv = randn64({2, 9, 24}, 8, false);
  for (std::size_t base : {0, 3}) {
    const Tensor whole = rope(x, options(10000.0, base));
    const Tensor whole_k = rope({qkv, 8, 8}, 2, options(10000.0, base));
    for (std::size_t k : {1, 4, 8}) {
      BOOST_TEST_CONTEXT("offset " << base << " + " << k) {
        const Tensor tail = rope(slice(x, 1, k, 9), options(10000.0, base + k));
        BOOST_CHECK(tail.to_vector() == slice(whole, 1, k, 9).to_vector());
        const Tensor tail_k = rope({slice(qkv, 1, k, 9), 8, 8}, 2, options(10000.0, base + k));
        BOOST_CHECK(tail_k.to_vector() == slice(whole_k, 1, k, 9).to_vector());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(rope_turns_pairs_and_keeps_their_norms) {
  const std::size_t d = 10, rotary = 6, h = rotary / 2;
  const Tensor x = randn64({3, 7, d}, 9, false);
  const auto in = x.to_vector(), out = rope(x, options(10000.0, 0, rotary)).to_vector();
  for (std::size_t row = 0; row < 21; ++row) {
    const double* a = in.data() + row * d;
    const double* b = out.data() + row * d;
    for (std::size_t i = 0; i < h; ++i) {
      const double before = a[i] * a[i] + a[i + h] * a[i + h], after = b[i] * b[i] + b[i + h] * b[i + h];
      BOOST_CHECK_MESSAGE(std::abs(after - before) <= 1e-12 * before, "row " << row << " pair " << i);
    }
    for (std::size_t j = rotary; j < d; ++j) BOOST_CHECK_EQUAL(b[j], a[j]);  // past rotary_dim: untouched
    if (row % 7 == 0)                                                        // position 0: angle 0, the identity
      for (std::size_t j = 0; j < d; ++j) BOOST_CHECK_EQUAL(b[j], a[j]);
  }
  // A pair does turn: position 1's first pair by exactly 1 radian.
  const auto one = rope(Tensor::from_vector({0, 0, 1, 0}, {2, 2}, DType::float64)).to_vector();
  check_close(one, {0, 0, std::cos(1.0), std::sin(1.0)}, 1e-15);
}

BOOST_AUTO_TEST_CASE(rope_float32_within_its_rounding) {
  // float32 against the float64 op on the same (float32) values. Each output is
  // x_i cos -+ x_partner sin with cos and sin rounded to float32 (relative error
  // u = 2^-24 each), two products and a sum each rounded once: to first order
  // |error| <= 3u (|x_i| + |x_partner|); 4u is allowed. The backward turns the gradient
  // back, the same bound with the gradient's values.
  const double u = std::ldexp(1.0, -24);
  const std::size_t heads = 3, d = 16, c = 64, begin = 8;  // columns [8, 56) of [2, 7, 64]
  const Tensor x32 = randn64({2, 7, c}, 10, false).to(DType::float32).requires_grad_();
  const Tensor x64 = x32.detach().to(DType::float64).requires_grad_();
  const Tensor w32 = randn64({2, 7, heads * d}, 11, false).to(DType::float32), w64 = w32.to(DType::float64);
  const RopeOptions o = options(10000.0, 50);
  const Tensor y32 = rope({x32, begin, heads * d}, heads, o), y64 = rope({x64, begin, heads * d}, heads, o);
  BOOST_CHECK(y32.dtype() == DType::float32);
  sum(y32 * w32).backward();
  sum(y64 * w64).backward();
  const auto got = y32.to_vector(), ref = y64.to_vector(), xs = x64.to_vector(), ws = w64.to_vector();
  const auto dx32 = x32.grad().to_vector(), dx64 = x64.grad().to_vector();
  for (std::size_t row = 0; row < 14; ++row)
    for (std::size_t j = 0; j < heads * d; ++j) {
      const std::size_t partner = j % d < d / 2 ? j + d / 2 : j - d / 2;
      const std::size_t at = row * heads * d + j, x_at = row * c + begin + j;
      const double bound = 4 * u * (std::abs(xs[x_at]) + std::abs(xs[row * c + begin + partner]));
      BOOST_CHECK_MESSAGE(std::abs(got[at] - ref[at]) <= bound,
                          "output " << at << ": " << got[at] << " vs " << ref[at]);
      const double grad_bound = 4 * u * (std::abs(ws[at]) + std::abs(ws[row * heads * d + partner]));
      BOOST_CHECK_MESSAGE(std::abs(dx32[x_at] - dx64[x_at]) <= grad_bound, "gradient " << x_at);
    }
  for (std::size_t row = 0; row < 14; ++row)  // columns outside the range: no gradient
    for (std::size_t j : {std::size_t{0}, begin - 1, begin + heads * d, c - 1})
      BOOST_CHECK_EQUAL(dx32[row * c + j], 0.0);
}

BOOST_AUTO_TEST_CASE(rope_is_the_same_on_any_thread_count) {
  // Large enough for the pool: 1024 rows of 8 heads of 64 from a [4, 256, 1536] tensor.
  const Tensor qkv = randn64({4, 256, 1536}, 12, false).to(DType::float32);
  const Tensor w = randn64({4, 256, 512}, 13, false).to(DType::float32);
  const int saved = num_threads();
  std::vector<double> first_out, first_grad;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const Tensor x = qkv.detach().requires_grad_();
    const Tensor y = rope({x, 512, 512}, 8, options(10000.0, 100));
    sum(y * w).backward();
    if (threads == 1) {
      first_out = y.to_vector(), first_grad = x.grad().to_vector();
      continue;
    }
    BOOST_CHECK_MESSAGE(y.to_vector() == first_out, threads << " threads: other values");
    BOOST_CHECK_MESSAGE(x.grad().to_vector() == first_grad, threads << " threads: other gradients");
  }
  set_num_threads(saved);
}

BOOST_AUTO_TEST_CASE(rope_bad_input) {
  const Tensor x = randn64({2, 3, 4}, 14, false), qkv = randn64({2, 5, 36}, 15, false);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  check_error([] { rope(Tensor()); }, {"rope", "undefined"});
  check_error([] { rope(randn64({2, 3, 5}, 16, false)); }, {"rope", "even", "5", "x [2, 3, 5]"});
  check_error([] { rope(randn64({8}, 17, false)); }, {"rope", "[..., T, D]", "x [8]"});
  check_error([] { rope(randn64({2, 3, 0}, 17, false)); }, {"rope", "even and positive", "x [2, 3, 0]"});
  for (double theta : {0.0, -1.0, inf, nan}) {
    check_error([&] { rope(x, options(theta, 0)); }, {"rope", "theta", "finite and > 0", "x [2, 3, 4]"});
    check_error([&] { rope({qkv, 0, 12}, 3, options(theta, 0)); }, {"rope", "theta", "x [2, 5, 36]", "heads 3"});
  }
  for (std::size_t rotary : {3, 6})
    check_error([&] { rope(x, options(10.0, 0, rotary)); }, {"rope", "rotary_dim " + std::to_string(rotary), "4"});
  check_error([&] { rope(x, options(10.0, std::numeric_limits<std::size_t>::max())); }, {"rope", "2^53", "[2, 3, 4]"});
  // Frequencies: one per turning pair, each finite and >= 0.
  for (const std::vector<double>& frequencies : {std::vector<double>{1.0}, std::vector<double>{1.0, 0.5, 0.1}}) {
    RopeOptions o = options(10.0, 0);
    o.frequencies = frequencies;
    check_error([&] { rope(x, o); },
                {"rope", "frequencies has " + std::to_string(frequencies.size()), "2 pairs", "x [2, 3, 4]"});
  }
  for (double bad : {-0.5, inf, nan}) {
    RopeOptions o = options(10.0, 0);
    o.frequencies = {1.0, bad};
    check_error([&] { rope({qkv, 0, 12}, 3, o); }, {"rope", "frequencies[1]", "finite and >= 0", "heads 3"});
  }
  // Column ranges: heads that do not divide the width, odd heads, rank, the range, no heads.
  check_error([&] { rope({qkv, 0, 12}, 5); }, {"rope", "equal heads", "x [2, 5, 36] columns [0, +12), heads 5"});
  check_error([&] { rope({qkv, 0, 12}, 4); }, {"rope", "even", "got 3", "heads 4"});
  check_error([&] { rope({qkv, 30, 12}, 3); }, {"rope", "lie inside", "columns [30, +12)"});
  check_error([&] { rope({qkv, 36}, 3); }, {"rope", "lie inside", "columns [36, +0)"});
  check_error([&] { rope({qkv, 0, 12}, 0); }, {"rope", "heads must be positive"});
  check_error([&] { rope({randn64({5, 12}, 18, false), 0, 12}, 2); }, {"rope", "[N, L, C]", "x [5, 12]"});
  check_error([&] { rope({reshape(x, {2, 3, 2, 2}), 0, 2}, 1); }, {"rope", "[N, L, C]", "x [2, 3, 2, 2]"});
}
