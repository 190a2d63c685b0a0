#define BOOST_TEST_MODULE gqa
// Grouped-query attention in the fused op: k and v with fewer heads than q, read in place
// (multi_head_attention's kv_heads, scaled_dot_product_attention's enable_gqa). Against
// the same attention with k and v repeated per query head (Hugging Face's repeat_kv),
// float64 gradient checks, the same bits on any thread count, bad input.
#include "helpers.hpp"

#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

namespace {

constexpr std::size_t kN = 2, kL = 5, kHeads = 4, kDk = 3, kDv = 2;  // per-head widths dk != dv

// Columns [begin, begin + kv_heads * d) of t, as `heads` heads: K/V head h / (heads /
// kv_heads) for query head h, repeated into a copy (the explicit repeat_kv).
Tensor repeated(const Tensor& t, std::size_t begin, std::size_t kv_heads, std::size_t d, std::size_t heads) {
  std::vector<Tensor> parts;
  for (std::size_t h = 0; h < heads; ++h) {
    const std::size_t from = begin + h / (heads / kv_heads) * d;
    parts.push_back(slice(t, 2, from, from + d));
  }
  return concat(parts, 2);
}

// The columns of one fused [N, L, C] (or [L, N, C]) projection: q (heads), then k and v
// (kv_heads each), as Llama's q_proj, k_proj and v_proj side by side.
struct Fused {
  std::size_t kv_heads;
  std::size_t k_begin() const { return kHeads * kDk; }
  std::size_t v_begin() const { return k_begin() + kv_heads * kDk; }
  std::size_t width() const { return v_begin() + kv_heads * kDv; }
  Columns q(const Tensor& t) const { return {t, 0, kHeads * kDk}; }
  Columns k(const Tensor& t) const { return {t, k_begin(), kv_heads * kDk}; }
  Columns v(const Tensor& t) const { return {t, v_begin(), kv_heads * kDv}; }
};

AttentionOutput gqa(const Fused& f, const Tensor& t, bool batch_first, const AttentionOptions& o) {
  return multi_head_attention(f.q(t), f.k(t), f.v(t), kHeads, f.kv_heads, batch_first, o);
}

// The same with k and v repeated to one head per query head.
AttentionOutput repeated_kv(const Fused& f, const Tensor& t, bool batch_first, const AttentionOptions& o) {
  const Tensor k = repeated(t, f.k_begin(), f.kv_heads, kDk, kHeads);
  const Tensor v = repeated(t, f.v_begin(), f.kv_heads, kDv, kHeads);
  return multi_head_attention(f.q(t), {k}, {v}, kHeads, batch_first, o);
}

// A keep mask per query head [N, heads, L, L], with two rows fully hidden (entry 0 head 1
// query 2, entry 1 head 3 query 0).
Tensor per_head_mask() {
  std::vector<double> keep = random_keep({kN, kHeads, kL, kL}, 11, 0.6).to_vector();
  for (std::size_t row : {1 * kL + 2, (kHeads + 3) * kL}) std::fill_n(keep.begin() + row * kL, kL, 0.0);
  return Tensor::from_vector(keep, {kN, kHeads, kL, kL}, DType::float64);
}

struct Case {
  std::string name;
  bool batch_first;
  AttentionOptions options;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"batch first", true, {}});
  c.push_back({"sequence first", false, {}});
  AttentionOptions o;
  o.is_causal = true;
  c.push_back({"causal", true, o});
  o = {};
  o.mask = per_head_mask();
  o.additive_mask = uniform64({kL, kL}, -1, 1, 12, false);
  c.push_back({"per-head and additive masks", true, o});
  o = {};
  o.mask = random_keep({kN, 1, 1, kL}, 13, 0.6);
  o.is_causal = true;
  c.push_back({"key mask and causal, sequence first", false, o});
  return c;
}

// {output, x's gradient, weights} of attend(x), the gradient of sum(out * c) +
// sum(weights * cw) for fixed random c and cw (through the weights' own backward too).
std::vector<std::vector<double>> forward_and_gradients(const std::function<AttentionOutput(const Tensor&)>& attend,
                                                       const Tensor& x) {
  const Tensor input = x.detach().requires_grad_();
  const AttentionOutput r = attend(input);
  const Tensor c = randn64(r.output.shape(), 91, false).to(x.dtype());
  Tensor loss = sum(r.output * c);
  if (r.weights.defined()) loss = loss + sum(r.weights * randn64(r.weights.shape(), 92, false).to(x.dtype()));
  loss.backward();
  std::vector<std::vector<double>> all = {r.output.to_vector(), input.grad().to_vector()};
  if (r.weights.defined()) all.push_back(r.weights.to_vector());
  return all;
}

}  // namespace

// Forward, weights and every gradient equal the explicit repeat's, for 4 query heads on
// 4, 2 and 1 K/V heads (ratios 1, 2, 4), with and without dropout.
BOOST_AUTO_TEST_CASE(equals_kv_repeated_per_head) {
  for (const Case& c : cases())
    for (std::size_t kv_heads : {4, 2, 1})
      for (double dropout : {0.0, 0.3}) {
        BOOST_TEST_CONTEXT(c.name << ", kv_heads " << kv_heads << ", dropout " << dropout) {
          const Fused f{kv_heads};
          const Shape shape = c.batch_first ? Shape{kN, kL, f.width()} : Shape{kL, kN, f.width()};
          const Tensor x = randn64(shape, 21 + kv_heads, false);
          const auto run = [&](auto attend) {
            return forward_and_gradients(
                [&](const Tensor& t) {
                  Generator fixed(7);
                  AttentionOptions o = c.options;
                  o.need_weights = true;
                  o.dropout_p = dropout;
                  o.generator = &fixed;
                  return attend(f, t, c.batch_first, o);
                },
                x);
          };
          const auto grouped = run(gqa), reference = run(repeated_kv);
          BOOST_TEST(grouped[2].size() == kN * kHeads * kL * kL);  // weights [N, heads, Lq, Lk]
          for (std::size_t i = 0; i < grouped.size(); ++i) check_close(grouped[i], reference[i], 1e-12);
        }
      }
}

// Cross-attention: q from one tensor, k and v from another (Lq != Lk).
BOOST_AUTO_TEST_CASE(separate_tensors_equal_kv_repeated) {
  const std::size_t kv_heads = 2, lq = 3;
  const Tensor q = randn64({kN, lq, kHeads * kDk}, 31), kv = randn64({kN, kL, kv_heads * (kDk + kDv)}, 32);
  AttentionOptions o;
  o.is_causal = true;
  o.need_weights = true;
  const auto loss = [&](const AttentionOutput& r) { return sum(r.output * r.output) + sum(r.weights * r.weights); };
  const AttentionOutput grouped =
      multi_head_attention({q}, {kv, 0, kv_heads * kDk}, {kv, kv_heads * kDk, 0}, kHeads, kv_heads, true, o);
  loss(grouped).backward();
  const Tensor rq = q.detach().requires_grad_(), rkv = kv.detach().requires_grad_();
  const AttentionOutput reference =
      multi_head_attention({rq}, {repeated(rkv, 0, kv_heads, kDk, kHeads)},
                           {repeated(rkv, kv_heads * kDk, kv_heads, kDv, kHeads)}, kHeads, true, o);
  loss(reference).backward();
  check_close(grouped.output.to_vector(), reference.output.to_vector(), 1e-12);
  check_close(q.grad().to_vector(), rq.grad().to_vector(), 1e-12);
  check_close(kv.grad().to_vector(), rkv.grad().to_vector(), 1e-12);
}

// float64 gradient checks: ratios 1, 2, 4, fused QKV columns of one tensor, with causal
// and per-head masks; and separate q, k, v tensors.
BOOST_AUTO_TEST_CASE(gradients_float64) {
  for (const Case& c : cases())
    for (std::size_t kv_heads : {4, 2, 1}) {
      BOOST_TEST_CONTEXT(c.name << ", kv_heads " << kv_heads) {
        const Fused f{kv_heads};
        const Shape shape = c.batch_first ? Shape{kN, kL, f.width()} : Shape{kL, kN, f.width()};
        check_gradients([&](const Inputs& in) { return gqa(f, in[0], c.batch_first, c.options).output; },
                        {randn64(shape, 41 + kv_heads)});
      }
    }
  AttentionOptions o;
  o.mask = random_keep({kN, kHeads, 3, kL}, 42, 0.7);
  o.need_weights = true;
  check_gradients(
      [&](const Inputs& in) {
        const AttentionOutput r = multi_head_attention({in[0]}, {in[1]}, {in[2]}, kHeads, 2, true, o);
        return sum(r.output * r.output) + sum(r.weights * r.weights);
      },
      {randn64({kN, 3, kHeads * kDk}, 43), randn64({kN, kL, 2 * kDk}, 44), randn64({kN, kL, 2 * kDv}, 45)});
}

// kv_heads == heads is the multi-head op: the same bits as the overload without kv_heads.
BOOST_AUTO_TEST_CASE(as_many_kv_heads_as_heads_is_multi_head_attention) {
  const Fused f{kHeads};
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const Tensor x = randn64(c.batch_first ? Shape{kN, kL, f.width()} : Shape{kL, kN, f.width()}, 51, false);
      const auto run = [&](bool with_kv_heads) {
        return forward_and_gradients(
            [&](const Tensor& t) {
              AttentionOptions o = c.options;
              o.need_weights = true;
              return with_kv_heads ? gqa(f, t, c.batch_first, o)
                                   : multi_head_attention(f.q(t), f.k(t), f.v(t), kHeads, c.batch_first, o);
            },
            x);
      };
      BOOST_TEST((run(true) == run(false)));
    }
  }
}

// scaled_dot_product_attention with enable_gqa: q [N, Hq, L, d], k and v [N, Hkv, S, d]
// (or broadcast over N), against k and v repeated with index_select.
BOOST_AUTO_TEST_CASE(scaled_dot_product_attention_with_enable_gqa) {
  struct Shapes {
    std::string name;
    Shape q, k, v, mask;
  };
  const std::vector<Shapes> shapes = {
      {"2 of 4 heads", {2, 4, 5, 3}, {2, 2, 6, 3}, {2, 2, 6, 2}, {}},
      {"one K/V head (multi-query)", {2, 4, 5, 3}, {2, 1, 6, 3}, {2, 1, 6, 2}, {}},
      {"k and v broadcast over N, per-head mask", {2, 4, 5, 3}, {1, 2, 6, 3}, {2, 6, 2}, {2, 4, 5, 6}},
      {"extra batch axis", {2, 1, 6, 4, 3}, {3, 3, 4, 3}, {3, 3, 4, 3}, {6, 1, 4}},
  };
  for (const Shapes& s : shapes) {
    BOOST_TEST_CONTEXT(s.name) {
      AttentionOptions o;
      o.enable_gqa = true;
      o.need_weights = true;
      o.is_causal = s.mask.empty();
      if (!s.mask.empty()) o.mask = random_keep(s.mask, 61, 0.6);
      const auto loss = [](const AttentionOutput& r) { return sum(r.output * r.output) + sum(r.weights * r.weights); };
      const Tensor q = randn64(s.q, 62), k = randn64(s.k, 63), v = randn64(s.v, 64);
      const AttentionOutput grouped = scaled_dot_product_attention(q, k, v, o);
      loss(grouped).backward();
      // repeat_kv: each of k's and v's heads repeated for its group of query heads.
      const std::size_t hq = s.q[s.q.size() - 3], hkv = s.k[s.k.size() - 3];
      std::vector<std::int64_t> ids;
      for (std::size_t h = 0; h < hq; ++h) ids.push_back(static_cast<std::int64_t>(h / (hq / hkv)));
      const Indices index{ids, {hq}};
      const Tensor rq = q.detach().requires_grad_(), rk = k.detach().requires_grad_(), rv = v.detach().requires_grad_();
      AttentionOptions plain = o;
      plain.enable_gqa = false;
      const AttentionOutput reference =
          scaled_dot_product_attention(rq, index_select(rk, -3, index), index_select(rv, -3, index), plain);
      loss(reference).backward();
      check_close(grouped.output.to_vector(), reference.output.to_vector(), 1e-12);
      check_close(grouped.weights.to_vector(), reference.weights.to_vector(), 1e-12);
      check_close(q.grad().to_vector(), rq.grad().to_vector(), 1e-12);
      check_close(k.grad().to_vector(), rk.grad().to_vector(), 1e-12);
      check_close(v.grad().to_vector(), rv.grad().to_vector(), 1e-12);
      check_gradients(
          [&](const Inputs& in) {
            const AttentionOutput r = scaled_dot_product_attention(in[0], in[1], in[2], o);
            return sum(r.output * r.output) + sum(r.weights * r.weights);
          },
          {randn64(s.q, 65), randn64(s.k, 66), randn64(s.v, 67)});
    }
  }
}

// float32 and bf16 (autocast), with dropout and the weights: the output, the weights and
// every gradient are the same bits on 1, 2, 3 and 5 threads (big enough to use the pool:
// 16 query heads on 4 K/V heads, 64 x 64 scores).
BOOST_AUTO_TEST_CASE(same_bits_on_any_thread_count) {
  const std::size_t n = 2, l = 64, heads = 8, kv_heads = 2, d = 16;
  Generator gen(71);
  const Tensor x = Tensor::randn({n, l, (heads + 2 * kv_heads) * d}, gen);
  const auto run = [&](Precision precision) {
    return forward_and_gradients(
        [&](const Tensor& t) {
          Generator fixed(8);
          AttentionOptions o;
          o.is_causal = true;
          o.dropout_p = 0.1;
          o.generator = &fixed;
          o.need_weights = true;
          const AutocastGuard autocast(precision);
          return multi_head_attention({t, 0, heads * d}, {t, heads * d, kv_heads * d},
                                      {t, (heads + kv_heads) * d, kv_heads * d}, heads, kv_heads, true, o);
        },
        x);
  };
  const int threads = num_threads();
  for (Precision precision : {Precision::float32, Precision::bfloat16}) {
    set_num_threads(1);
    const auto one = run(precision);
    for (int t : {2, 3, 5}) {
      set_num_threads(t);
      BOOST_TEST((run(precision) == one), "precision " << static_cast<int>(precision) << ", " << t << " threads");
    }
  }
  set_num_threads(threads);
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_op_and_shapes) {
  const char* op = "multi_head_attention";
  const Tensor x = randn64({2, 5, 24}, 81, false);  // q [0, 12): 4 heads of 3
  check_error(
      [&] {
        multi_head_attention({x, 0, 12}, {x, 12, 6}, {x, 18, 6}, 4, 0, true);
      },
      {op, "kv_heads must be positive and divide heads", "[2, 5, 24]", "heads 4, kv_heads 0"});
  check_error(
      [&] {
        multi_head_attention({x, 0, 12}, {x, 12, 6}, {x, 18, 6}, 4, 3, true);
      },
      {op, "kv_heads must be positive and divide heads", "heads 4, kv_heads 3"});
  check_error(
      [&] {
        multi_head_attention({x, 0, 12}, {x, 12, 6}, {x, 18, 6}, 2, 4, true);
      },
      {op, "kv_heads must be positive and divide heads", "heads 2, kv_heads 4"});
  // k as 2 heads of 4 where q's heads are 3 wide.
  check_error(
      [&] {
        multi_head_attention({x, 0, 12}, {x, 12, 8}, {x, 20, 4}, 4, 2, true);
      },
      {op, "widths differ per head", "columns [12, +8)", "kv_heads 2"});
  // v's 5 columns do not split into 2 heads.
  check_error(
      [&] {
        multi_head_attention({x, 0, 12}, {x, 12, 6}, {x, 18, 5}, 4, 2, true);
      },
      {op, "split into equal heads", "columns [18, +5)", "kv_heads 2"});
  AttentionOptions o;
  o.mask = random_keep({2, 2, 5, 5}, 82, 0.5);  // a mask over K/V heads, not query heads
  check_error(
      [&] {
        multi_head_attention({x, 0, 12}, {x, 12, 6}, {x, 18, 6}, 4, 2, true, o);
      },
      {op, "mask [2, 2, 5, 5]", "[2, 4]"});

  const Tensor q = randn64({2, 4, 5, 3}, 83, false), k = randn64({2, 3, 5, 3}, 84, false);
  o = {};
  o.enable_gqa = true;
  op = "scaled_dot_product_attention";
  check_error([&] { scaled_dot_product_attention(q, k, k, o); },
              {op, "k and v heads (3) must divide q's heads (4)", "q [2, 4, 5, 3]", "k [2, 3, 5, 3]"});
  const Tensor k2 = randn64({2, 2, 5, 3}, 85, false);
  check_error([&] { scaled_dot_product_attention(q, k2, k, o); }, {op, "head counts differ", "v [2, 3, 5, 3]"});
  check_error(
      [&] {
        scaled_dot_product_attention(randn64({5, 3}, 86), k2, k2, o);
      },
      {op, "enable_gqa needs a head axis", "q [5, 3]"});
  // Without enable_gqa, fewer K/V heads do not broadcast.
  check_error([&] { scaled_dot_product_attention(q, k2, k2); }, {op, "leading axes", "k [2, 2, 5, 3]"});
}

// Past one of the kernel's blocks each way (128 positions in float64), heads read in place
// (row strides past a head's width), causal: dQ sums products over key blocks, dK and dV
// over query blocks and over the query heads of their group. Against the explicit repeat,
// and the gradient against finite differences.
BOOST_AUTO_TEST_CASE(across_kernel_blocks_with_heads_in_place) {
  AttentionOptions o;
  o.is_causal = true;
  const Fused f{2};
  const auto grouped = [&](const Tensor& t) { return gqa(f, t, true, o); };
  const Tensor x = randn64({1, 300, f.width()}, 41, false);
  const auto explicit_repeat = [&](const Tensor& t) { return repeated_kv(f, t, true, o); };
  const auto mine = forward_and_gradients(grouped, x), reference = forward_and_gradients(explicit_repeat, x);
  for (std::size_t i = 0; i < mine.size(); ++i) check_close(mine[i], reference[i], 1e-12);
  check_gradients([&](const Inputs& in) { return grouped(in[0]).output; }, {randn64({1, 140, f.width()}, 42)});
}
