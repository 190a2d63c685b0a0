#define BOOST_TEST_MODULE mha
// MultiHeadAttention in the configuration of each reference write-up (../shared/seeds),
// against the textbook computation from the module's own weights, and gradient checks of
// the module with every kind of argument.
#include "helpers.hpp"

#include <limits>
#include <numbers>

#include "xgrad/nn/nn.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

namespace {

const double inf = std::numeric_limits<double>::infinity();

// [N, L, H*d] -> [N, H, L, d], the careful way: split the feature axis only.
Tensor heads_of(const Tensor& x, std::size_t heads) {
  const Shape s = x.shape();
  const auto i = [](std::size_t v) { return static_cast<std::int64_t>(v); };
  return permute(reshape(x, {i(s[0]), i(s[1]), i(heads), i(s[2] / heads)}), {0, 2, 1, 3});
}

// Batch-first attention composed from plain ops and the module's parameters; `keep` is
// a [N|1, H|1, L|1, S] mask (1 = attend) or undefined.
Tensor reference(const nn::MultiHeadAttention& m, const Tensor& q, const Tensor& k, const Tensor& v,
                 const Tensor& keep = Tensor(), bool causal = false) {
  const auto& o = m.options();
  const std::size_t dk = o.dim_k, dv = o.dim_v, h = o.num_heads;
  const auto rows = [](const Tensor& t, std::size_t from, std::size_t to) {
    return t.defined() ? slice(t, 0, from, to) : Tensor();
  };
  const Tensor wq = m.in_proj_weight.defined() ? rows(m.in_proj_weight, 0, dk) : m.q_proj_weight;
  const Tensor wk = m.in_proj_weight.defined() ? rows(m.in_proj_weight, dk, 2 * dk) : m.k_proj_weight;
  const Tensor wv = m.in_proj_weight.defined() ? rows(m.in_proj_weight, 2 * dk, 2 * dk + dv) : m.v_proj_weight;
  const Tensor qh = heads_of(linear(q, wq, rows(m.in_proj_bias, 0, dk)), h);
  const Tensor kh = heads_of(linear(k, wk, rows(m.in_proj_bias, dk, 2 * dk)), h);
  const Tensor vh = heads_of(linear(v, wv, rows(m.in_proj_bias, 2 * dk, 2 * dk + dv)), h);
  Tensor scores = matmul(qh, kh, false, true) / std::sqrt(static_cast<double>(dk / h));
  if (keep.defined()) scores = masked_fill(scores, eq(keep.to(q.dtype()), 0.0), -inf);
  if (causal) {
    const std::size_t l = q.size(1), s = k.size(1);
    std::vector<double> future(l * s);
    for (std::size_t i = 0; i < l; ++i)
      for (std::size_t j = 0; j < s; ++j) future[i * s + j] = j > i;
    scores = masked_fill(scores, Tensor::from_vector(future, {l, s}, q.dtype()), -inf);
  }
  const Tensor heads = matmul(softmax(scores, -1), vh);  // [N, H, L, dv / H]
  const Shape hs = heads.shape();
  const Tensor merged =
      reshape(permute(heads, {0, 2, 1, 3}), {static_cast<std::int64_t>(hs[0]), static_cast<std::int64_t>(hs[2]), -1});
  return m.out_proj ? linear(merged, m.out_proj->weight, m.out_proj->bias) : merged;
}

}  // namespace

// 003, the Annotated Transformer: MultiHeadedAttention(h = 8, d_model = 512), the last
// map kept in self.attn, on a (1, 10, 512) input.
BOOST_AUTO_TEST_CASE(annotated_transformer_configuration) {
  manual_seed(3);
  nn::MultiHeadAttentionOptions o;
  o.embed_dim = 512;
  o.num_heads = 8;
  o.dropout = 0.1;
  o.keep_attention = true;
  nn::MultiHeadAttention attn(o);
  attn.to(DType::float64).eval();
  const Tensor x = randn64({1, 10, 512}, 1, false);
  // Its src_mask [N, 1, S]: the last two positions are padding.
  const Tensor src_mask = Tensor::from_vector({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {1, 1, 10}, DType::float64);
  nn::AttentionArgs args;
  args.keep_mask = src_mask;
  const Tensor y = attn.forward(x, x, x, args);
  BOOST_CHECK(y.shape() == (Shape{1, 10, 512}));
  check_close(y.to_vector(), reference(attn, x, x, x, unsqueeze(src_mask, 1)).to_vector(), 1e-10);
  const Tensor map = attn.last_attention();
  BOOST_CHECK(map.shape() == (Shape{1, 8, 10, 10}));
  BOOST_CHECK(!map.requires_grad());
  const auto p = map.to_vector();
  for (std::size_t row = 0; row < 80; ++row) {
    BOOST_CHECK_CLOSE(p[row * 10] + p[row * 10 + 1] + p[row * 10 + 2] + p[row * 10 + 3] + p[row * 10 + 4] +
                          p[row * 10 + 5] + p[row * 10 + 6] + p[row * 10 + 7],
                      1.0, 1e-9);
    BOOST_CHECK_EQUAL(p[row * 10 + 8] + p[row * 10 + 9], 0.0);
  }
  // In training, dropout acts on the weights: the kept map shows it, and a seed repeats it.
  attn.train();
  manual_seed(11);
  const auto a = attn.forward(x, x, x, args).to_vector();
  const auto dropped_map = attn.last_attention().to_vector();
  manual_seed(11);
  BOOST_CHECK(attn.forward(x, x, x, args).to_vector() == a);
  BOOST_CHECK(std::count(dropped_map.begin(), dropped_map.end(), 0.0) > 160 + 20);
}

// 002: a fused QKV projection (one Linear to 3 * hidden), dropout on the weights, a
// (batch, heads, s, s) mask; x (3, 2, 128) with 8 heads. Its -inf fill made a fully
// masked row NaN; here that row attends to nothing and outputs the projection's bias.
BOOST_AUTO_TEST_CASE(fused_qkv_configuration) {
  nn::MultiHeadAttentionOptions o;
  o.embed_dim = 128;
  o.num_heads = 8;
  o.dropout = 0.1;
  nn::MultiHeadAttention attn(o);
  attn.to(DType::float64).eval();
  BOOST_CHECK(attn.in_proj_weight.shape() == (Shape{3 * 128, 128}));  // one packed projection
  const Tensor x = randn64({3, 2, 128}, 2, false);
  std::vector<double> keep(3 * 8 * 2 * 2, 1.0);
  keep[2] = keep[3] = 0.0;  // batch 0, head 0, query 1: every key hidden
  keep[3 * 8 * 2 * 2 - 1] = 0.0;
  const Tensor mask = Tensor::from_vector(keep, {3, 8, 2, 2}, DType::float64);
  nn::AttentionArgs args;
  args.keep_mask = mask;
  const Tensor y = attn.forward(x, x, x, args);
  for (double v : y.to_vector()) BOOST_CHECK(std::isfinite(v));
  check_close(y.to_vector(), reference(attn, x, x, x, mask).to_vector(), 1e-10);
  // The gradient check runs the same structure (8 heads, a 2 x 2 mask per head, a hidden
  // row) at width 16: at 128 it would take 65k parameters times two forwards.
  o.embed_dim = 16;
  nn::MultiHeadAttention small(o);
  small.train();
  check_module_gradients(small,
                         [&](const Inputs& in) {
                           manual_seed(3);  // dropout, the same on every call
                           return small.forward(in[0], in[0], in[0], args);
                         },
                         {randn64({3, 2, 16}, 3)});
}

// 004, labml: sequence-first [seq, batch, d_model] with a mask [seq_q or 1, seq_k,
// batch or 1], the map kept for logging; (10, 32, 512) with a [1, 10, 32] mask.
BOOST_AUTO_TEST_CASE(sequence_first_configuration) {
  nn::MultiHeadAttentionOptions o;
  o.embed_dim = 512;
  o.num_heads = 8;
  o.batch_first = false;
  o.keep_attention = true;
  nn::MultiHeadAttention seq_first(o);
  o.batch_first = true;
  nn::MultiHeadAttention batch_first(o);
  batch_first.load_state_dict(seq_first.state_dict());

  const Tensor x = randn64({10, 32, 512}, 4, false).to(DType::float32);
  const Tensor mask = random_keep({1, 10, 32}, 5, 0.8);  // [1, S, N]
  nn::AttentionArgs args;
  args.seq_first_keep_mask = mask;
  const Tensor y = seq_first(x);
  const Tensor y_masked = seq_first.forward(x, x, x, args);
  BOOST_CHECK(y_masked.shape() == (Shape{10, 32, 512}));
  BOOST_CHECK(seq_first.last_attention().shape() == (Shape{32, 8, 10, 10}));

  // The same computation batch-first, with the mask as PyTorch's key_padding_mask [N, S]
  // (1 = padding).
  const Tensor xb = transpose(x, 0, 1);
  nn::AttentionArgs key_args;
  key_args.key_padding_mask = eq(transpose(squeeze(mask, 0), 0, 1), 0.0);
  const auto expected = transpose(batch_first.forward(xb, xb, xb, key_args), 0, 1).to_vector();
  const auto got = y_masked.to_vector();
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
  BOOST_CHECK_SMALL(worst, 1e-5);
  check_close(y.to_vector(), transpose(batch_first(xb), 0, 1).to_vector(), 1e-5);
}

// 000: self-attention with dim_in, dim_k, dim_v and no bias, single- and multi-head; its
// multi-head reshape mixed heads with positions. dim_in 16, dim_k 12, dim_v 20, 4 heads
// -> (batch, n, 20): the concatenated heads, no output projection.
BOOST_AUTO_TEST_CASE(separate_key_and_value_widths_configuration) {
  for (std::size_t heads : {1, 4}) {
    nn::MultiHeadAttentionOptions o;
    o.embed_dim = 16;
    o.num_heads = heads;
    o.dim_k = 12;
    o.dim_v = 20;
    o.bias = false;
    o.output_projection = false;
    nn::MultiHeadAttention attn(o);
    attn.to(DType::float64);
    BOOST_CHECK(attn.state_dict().size() == 1);  // in_proj_weight only
    const Tensor x = randn64({2, 5, 16}, 6, false);
    const Tensor y = attn(x);
    BOOST_CHECK(y.shape() == (Shape{2, 5, 20}));
    check_close(y.to_vector(), reference(attn, x, x, x).to_vector(), 1e-10);
    check_module_gradients(attn, [&](const Inputs& in) { return attn(in[0]); }, {randn64({2, 5, 16}, 7)});
  }
  // Position 0 of batch 1 depends on batch 1 only: heads never mix across positions.
  nn::MultiHeadAttentionOptions o;
  o.embed_dim = 16, o.num_heads = 4, o.dim_k = 12, o.dim_v = 20, o.bias = false, o.output_projection = false;
  nn::MultiHeadAttention attn(o);
  Tensor x = Tensor::randn({2, 5, 16}, default_generator());
  const auto before = slice(attn(x), 0, 1, 2).to_vector();
  x.data<float>()[3] += 1.0f;  // change batch 0 only
  BOOST_CHECK(slice(attn(x), 0, 1, 2).to_vector() == before);
}

// 001: MultiHeadAttention(d_model, num_heads) with W_q, W_k, W_v, W_o; without masks or
// positions, permuting the input tokens permutes the output rows the same way.
BOOST_AUTO_TEST_CASE(permutation_equivariance_without_positions) {
  nn::MultiHeadAttention attn(16, 4);
  attn.to(DType::float64);
  const Tensor x = randn64({1, 6, 16}, 8, false);
  const std::vector<std::size_t> order = {3, 0, 5, 1, 4, 2};
  std::vector<Tensor> rows;
  for (std::size_t i : order) rows.push_back(slice(x, 1, i, i + 1));
  const Tensor permuted = concat(rows, 1);
  const auto y = attn(x).to_vector(), yp = attn(permuted).to_vector();
  for (std::size_t r = 0; r < order.size(); ++r)
    for (std::size_t d = 0; d < 16; ++d) BOOST_CHECK_CLOSE(yp[r * 16 + d], y[order[r] * 16 + d], 1e-9);
  // Adding positions breaks the symmetry: that is what positional encodings are for.
  nn::PositionalEncoding positions(16, 10);
  positions.to(DType::float64);
  const auto z = attn(positions(x)).to_vector(), zp = attn(positions(permuted)).to_vector();
  BOOST_CHECK(std::abs(zp[0] - z[order[0] * 16]) > 1e-6);
}

BOOST_AUTO_TEST_CASE(cross_attention_from_other_widths) {
  nn::MultiHeadAttentionOptions o;
  o.embed_dim = 8;
  o.num_heads = 2;
  o.kdim = 6;
  o.vdim = 5;
  nn::MultiHeadAttention attn(o);
  attn.to(DType::float64);
  BOOST_CHECK(attn.k_proj_weight.shape() == (Shape{8, 6}));
  const Tensor q = randn64({2, 3, 8}, 9), k = randn64({2, 4, 6}, 10), v = randn64({2, 4, 5}, 11);
  check_close(attn.forward(q, k, v).to_vector(), reference(attn, q, k, v).to_vector(), 1e-10);
  check_module_gradients(attn, [&](const Inputs& in) { return attn.forward(in[0], in[1], in[2]); }, {q, k, v});
}

BOOST_AUTO_TEST_CASE(gradients_with_every_kind_of_argument) {
  nn::MultiHeadAttentionOptions o;
  o.embed_dim = 6;
  o.num_heads = 2;
  o.dim_k = 4;
  o.dim_v = 8;
  nn::MultiHeadAttention attn(o);
  const Tensor q = randn64({2, 3, 6}, 12), kv = randn64({2, 4, 6}, 13);
  std::vector<std::pair<std::string, nn::AttentionArgs>> variants(14);
  variants[0].first = "no mask";
  variants[1] = {"key_padding_mask", {}};
  variants[1].second.key_padding_mask = Tensor::from_vector({0, 0, 1, 0, 0, 1, 0, 0}, {2, 4}, DType::float32);
  variants[2] = {"keep_mask [L, S]", {}};
  variants[2].second.keep_mask = random_keep({3, 4}, 14, 0.7);
  variants[3] = {"keep_mask [N, L, S]", {}};
  variants[3].second.keep_mask = random_keep({2, 3, 4}, 15, 0.7);
  variants[4] = {"keep_mask [N, H, L, S] with a hidden row", {}};
  variants[4].second.keep_mask = masked_fill(random_keep({2, 2, 3, 4}, 16, 0.7),
                                             Tensor::from_vector({0, 1, 0}, {1, 1, 3, 1}, DType::float64), 0.0);
  variants[5] = {"attn_bias", {}};
  variants[5].second.attn_bias = uniform64({3, 4}, -1, 1, 17, false);
  variants[6] = {"causal", {}};
  variants[6].second.is_causal = true;
  variants[7] = {"need_weights per head", {}};
  variants[7].second.need_weights = true;
  variants[7].second.average_weights = false;
  variants[8] = {"key_padding_mask and causal", {}};
  variants[8].second.key_padding_mask = Tensor::from_vector({0, 1, 0, 0, 0, 0, 1, 0}, {2, 4}, DType::float64);
  variants[8].second.is_causal = true;
  variants[9] = {"attn_mask [L, S] (1 = hidden)", {}};
  variants[9].second.attn_mask = random_keep({3, 4}, 21, 0.3);
  variants[10] = {"attn_mask [N * H, L, S]", {}};
  variants[10].second.attn_mask = random_keep({4, 3, 4}, 22, 0.3);
  variants[11] = {"attn_bias [N * H, L, S] and key_padding_bias", {}};
  variants[11].second.attn_bias = uniform64({4, 3, 4}, -1, 1, 23, false);
  variants[11].second.key_padding_bias = uniform64({2, 4}, -2, 0, 24, false);
  variants[12] = {"attn_mask [N, H, L, S] and keep_mask [N, L, S] together", {}};
  variants[12].second.attn_mask = random_keep({2, 1, 3, 4}, 25, 0.2);
  variants[12].second.keep_mask = random_keep({2, 3, 4}, 26, 0.8);
  variants[13] = {"seq-first keep mask layout, batch-first data", {}};
  variants[13].second.keep_mask = random_keep({2, 1, 4}, 27, 0.7);
  for (const auto& [name, args] : variants) {
    BOOST_TEST_CONTEXT(name) {
      check_module_gradients(
          attn, [&, args = args](const Inputs& in) { return attn.forward(in[0], in[1], in[1], args); }, {q, kv});
    }
  }
}

BOOST_AUTO_TEST_CASE(gradients_sequence_first_and_dropout) {
  nn::MultiHeadAttentionOptions o;
  o.embed_dim = 4;
  o.num_heads = 2;
  o.batch_first = false;
  o.dropout = 0.25;
  nn::MultiHeadAttention attn(o);
  nn::AttentionArgs args;
  args.seq_first_keep_mask = random_keep({1, 5, 2}, 18, 0.8);
  check_module_gradients(attn,
                         [&](const Inputs& in) {
                           manual_seed(19);  // the same dropout mask on every call
                           return attn.forward(in[0], in[0], in[0], args);
                         },
                         {randn64({5, 2, 4}, 20)});
}

BOOST_AUTO_TEST_CASE(weights_average_over_heads) {
  nn::MultiHeadAttention attn(8, 2);
  const Tensor x = Tensor::randn({2, 3, 8}, default_generator());
  nn::AttentionArgs args;
  args.need_weights = true;
  const Tensor averaged = attn.attend(x, x, x, args).weights;
  args.average_weights = false;
  const Tensor per_head = attn.attend(x, x, x, args).weights;
  BOOST_CHECK(averaged.shape() == (Shape{2, 3, 3}) && per_head.shape() == (Shape{2, 2, 3, 3}));
  check_close(averaged.to_vector(), mean(per_head, {1}).to_vector(), 1e-7);
}

BOOST_AUTO_TEST_CASE(unbatched_input) {
  nn::MultiHeadAttention attn(8, 2);
  const Tensor x = Tensor::randn({3, 8}, default_generator());
  const Tensor y = attn(x);
  BOOST_CHECK(y.shape() == (Shape{3, 8}));
  check_close(y.to_vector(), squeeze(attn(unsqueeze(x, 0)), 0).to_vector(), 1e-6);
}

BOOST_AUTO_TEST_CASE(bad_configuration_and_input) {
  check_error([] { nn::MultiHeadAttention(10, 3); }, {"MultiHeadAttention", "num_heads 3", "dim_k 10"});
  nn::MultiHeadAttention attn(8, 2);
  check_error([&] { attn(Tensor::zeros({2, 3, 6})); }, {"MultiHeadAttention", "embed_dim 8", "[2, 3, 6]"});
  check_error(
      [&] {
        attn.forward(Tensor::zeros({2, 3, 8}), Tensor::zeros({2, 4, 8}), Tensor::zeros({2, 5, 8}));
      },
      {"MultiHeadAttention", "key [2, 4, 8]", "value [2, 5, 8]"});
  nn::AttentionArgs args;
  args.key_padding_mask = Tensor::zeros({2, 5});
  check_error(
      [&] {
        attn.forward(Tensor::zeros({2, 3, 8}), Tensor::zeros({2, 4, 8}), Tensor::zeros({2, 4, 8}), args);
      },
      {"key_padding_mask of shape [2, 5]", "[2, 4]"});
  args = {};
  args.attn_mask = Tensor::ones({3, 3, 4});
  check_error(
      [&] {
        attn.forward(Tensor::zeros({2, 3, 8}), Tensor::zeros({2, 4, 8}), Tensor::zeros({2, 4, 8}), args);
      },
      {"attn_mask of shape [3, 3, 4]", "[N * H, L, S] = [4, 3, 4]"});
  args = {};
  args.seq_first_keep_mask = Tensor::ones({1, 4, 3});
  check_error(
      [&] {
        attn.forward(Tensor::zeros({2, 3, 8}), Tensor::zeros({2, 4, 8}), Tensor::zeros({2, 4, 8}), args);
      },
      {"seq_first_keep_mask of shape [1, 4, 3]"});
  check_error([&] { attn.last_attention(); }, {"keep_attention"});
}

BOOST_AUTO_TEST_CASE(transformer_encoder_layer) {
  for (bool use_gelu : {false, true}) {
    nn::TransformerEncoderLayerOptions o;
    o.d_model = 8;
    o.nhead = 2;
    o.dim_feedforward = 16;
    o.dropout = 0.1;
    o.activation = use_gelu ? nn::Activation::gelu : nn::Activation::relu;
    o.norm_first = use_gelu;  // both layouts
    nn::TransformerEncoderLayer layer(o);
    const std::vector<std::string> expected = {"self_attn.in_proj_weight",
                                               "self_attn.in_proj_bias",
                                               "self_attn.out_proj.weight",
                                               "self_attn.out_proj.bias",
                                               "linear1.weight",
                                               "linear1.bias",
                                               "linear2.weight",
                                               "linear2.bias",
                                               "norm1.weight",
                                               "norm1.bias",
                                               "norm2.weight",
                                               "norm2.bias"};
    std::vector<std::string> names;
    for (const auto& [name, p] : layer.named_parameters()) names.push_back(name);
    BOOST_CHECK(names == expected);
    nn::AttentionArgs args;
    args.is_causal = true;
    check_module_gradients(layer,
                           [&](const Inputs& in) {
                             manual_seed(21);  // dropout in three places, the same on every call
                             return layer.forward(in[0], args);
                           },
                           {randn64({2, 4, 8}, 22)});
    layer.eval();
    const Tensor x = randn64({2, 4, 8}, 23, false);
    BOOST_CHECK(layer(x).to_vector() == layer(x).to_vector());
  }
}

BOOST_AUTO_TEST_CASE(transformer_layer_with_gelu_tanh_applies_the_tanh_formula) {
  // GPT-2's "gelu_new", PyTorch's approximate="tanh", written out from plain ops.
  const auto gelu_tanh = [](const Tensor& h) {
    return 0.5 * h * (1.0 + tanh(std::sqrt(2.0 / std::numbers::pi) * (h + 0.044715 * h * h * h)));
  };
  nn::TransformerEncoderLayerOptions o;
  o.d_model = 8;
  o.nhead = 2;
  o.dim_feedforward = 16;
  o.dropout = 0.0;
  o.norm_first = true;
  o.activation = nn::Activation::gelu_tanh;
  nn::TransformerEncoderLayer layer(o);
  layer.to(DType::float64);
  layer.eval();
  BOOST_CHECK(layer.extra_repr().find("gelu_tanh") != std::string::npos);
  const Tensor x = randn64({2, 4, 8}, 24, false);
  const Tensor n1 = layer.norm1->forward(x);
  const Tensor h = x + layer.self_attn->forward(n1, n1, n1);
  const Tensor expected = h + layer.linear2->forward(gelu_tanh(layer.linear1->forward(layer.norm2->forward(h))));
  check_close(layer(x).to_vector(), expected.to_vector(), 1e-12);
  // Not the exact GELU: the same weights with Activation::gelu compute another function.
  o.activation = nn::Activation::gelu;
  nn::TransformerEncoderLayer exact(o);
  exact.to(DType::float64);
  exact.load_state_dict(layer.state_dict());
  exact.eval();
  const auto a = layer(x).to_vector(), b = exact(x).to_vector();
  double largest = 0;
  for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::abs(a[i] - b[i]));
  BOOST_CHECK_MESSAGE(largest > 1e-6, "gelu_tanh and gelu agree to " << largest);
  check_module_gradients(layer, [&](const Inputs& in) { return layer(in[0]); }, {randn64({2, 4, 8}, 25)});
}

BOOST_AUTO_TEST_CASE(attention_weights_returned_by_the_module_carry_a_gradient) {
  nn::MultiHeadAttention attn(8, 2);
  attn.to(DType::float64);
  for (bool average : {true, false}) {
    nn::AttentionArgs args;
    args.need_weights = true;
    args.average_weights = average;
    args.is_causal = true;
    check_module_gradients(attn, [&](const Inputs& in) { return attn.attend(in[0], in[0], in[0], args).weights; },
                           {randn64({2, 5, 8}, 61)});
  }
}

// The PyTorch-polarity forms are the keep forms negated; PyTorch's 3-D attn_mask is
// [N * H, L, S], batch-major.
BOOST_AUTO_TEST_CASE(mask_forms_agree) {
  nn::MultiHeadAttention attn(8, 2);
  attn.to(DType::float64);
  const Tensor q = randn64({2, 3, 8}, 71, false), kv = randn64({2, 4, 8}, 72, false);
  const auto run = [&](const nn::AttentionArgs& args) { return attn.forward(q, kv, kv, args).to_vector(); };
  const Tensor hidden = random_keep({2, 2, 3, 4}, 73, 0.3);  // 1 = hidden
  nn::AttentionArgs torch_form, keep_form, flat_form;
  torch_form.attn_mask = hidden;
  keep_form.keep_mask = eq(hidden, 0.0);
  flat_form.attn_mask = reshape(hidden, {4, 3, 4});
  check_close(run(torch_form), run(keep_form));
  check_close(run(torch_form), run(flat_form));
  const Tensor padding = Tensor::from_vector({0, 0, 1, 1, 0, 1, 0, 0}, {2, 4}, DType::float64);
  nn::AttentionArgs padded, kept, biased;
  padded.key_padding_mask = padding;
  kept.keep_mask = reshape(eq(padding, 0.0), {2, 1, 4});
  biased.key_padding_bias = masked_fill(Tensor::zeros({2, 4}, DType::float64), padding, -INFINITY);
  check_close(run(padded), run(kept));
  check_close(run(padded), run(biased));
  // Unbatched: key_padding_mask [S], attn_mask [H, L, S].
  const Tensor q1 = randn64({3, 8}, 74, false), kv1 = randn64({4, 8}, 75, false);
  nn::AttentionArgs one;
  one.key_padding_mask = Tensor::from_vector({0, 1, 0, 0}, {4}, DType::float64);
  one.attn_mask = random_keep({2, 3, 4}, 76, 0.2);
  nn::AttentionArgs batched;
  batched.key_padding_mask = unsqueeze(one.key_padding_mask, 0);
  batched.attn_mask = one.attn_mask;
  check_close(attn.forward(q1, kv1, kv1, one).to_vector(),
              squeeze(attn.forward(unsqueeze(q1, 0), unsqueeze(kv1, 0), unsqueeze(kv1, 0), batched), 0).to_vector());
}

BOOST_AUTO_TEST_CASE(bias_kv_and_zero_attn) {
  for (bool batch_first : {true, false}) {
    nn::MultiHeadAttentionOptions o;
    o.embed_dim = 6;
    o.num_heads = 2;
    o.dim_v = 4;
    o.add_bias_kv = true;
    o.add_zero_attn = true;
    o.batch_first = batch_first;
    nn::MultiHeadAttention attn(o);
    attn.to(DType::float64);
    BOOST_CHECK(attn.bias_k.shape() == (Shape{1, 1, 6}) && attn.bias_v.shape() == (Shape{1, 1, 4}));
    const auto names = attn.state_dict();
    BOOST_CHECK(names.count("bias_k") == 1 && names.count("bias_v") == 1);
    BOOST_CHECK(attn.to_string().find("add_bias_kv=true, add_zero_attn=true") != std::string::npos);
    const Tensor x = randn64(batch_first ? Shape{2, 3, 6} : Shape{3, 2, 6}, 77);
    nn::AttentionArgs args;
    args.need_weights = true;
    args.average_weights = false;
    // Two more keys, which every query sees: the weights have S + 2 columns.
    BOOST_CHECK(attn.attend(x, x, x, args).weights.shape() == (Shape{2, 2, 3, 5}));
    args.key_padding_mask = Tensor::from_vector({0, 0, 1, 1, 1, 1}, {2, 3}, DType::float64);  // a row all padding
    args.is_causal = true;
    for (bool weights : {false, true})
      check_module_gradients(attn,
                             [&](const Inputs& in) {
                               const AttentionOutput r = attn.attend(in[0], in[0], in[0], args);
                               return weights ? r.weights : r.output;
                             },
                             {x});
    // Every query attends to the extra keys, even one whose own keys are all padding.
    const auto w = attn.attend(x, x, x, args).weights.to_vector();
    for (std::size_t row = 0; row < 12; ++row) BOOST_CHECK_GT(w[row * 5 + 3] + w[row * 5 + 4], 0.0);
    // A mask broadcast over the keys ([L, 1]) covers the given keys only, as the full [L, S] one.
    nn::AttentionArgs narrow, full;
    narrow.need_weights = full.need_weights = true;
    narrow.keep_mask = Tensor::from_vector({0, 1, 1}, {3, 1}, DType::float64);  // query 0 sees no given key
    full.keep_mask = Tensor::from_vector({0, 0, 0, 1, 1, 1, 1, 1, 1}, {3, 3}, DType::float64);
    check_close(attn.attend(x, x, x, narrow).weights.to_vector(), attn.attend(x, x, x, full).weights.to_vector());
    check_close(attn.attend(x, x, x, narrow).output.to_vector(), attn.attend(x, x, x, full).output.to_vector());
  }
}

BOOST_AUTO_TEST_CASE(decoder_layer_and_stacks_gradients) {
  nn::TransformerLayerOptions o;
  o.d_model = 8;
  o.nhead = 2;
  o.dim_feedforward = 12;
  o.dropout = 0.1;
  nn::AttentionArgs causal, padded;
  causal.is_causal = true;
  padded.key_padding_mask = Tensor::from_vector({0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 5}, DType::float64);
  for (bool norm_first : {false, true}) {
    BOOST_TEST_CONTEXT("norm_first " << norm_first) {
      o.norm_first = norm_first;
      o.activation = norm_first ? nn::Activation::gelu : nn::Activation::relu;
      nn::TransformerDecoderLayer layer(o);
      layer.to(DType::float64);
      check_module_gradients(layer,
                             [&](const Inputs& in) {
                               manual_seed(31);  // dropout in four places, the same on every call
                               return layer.forward(in[0], in[1], causal, padded);
                             },
                             {randn64({2, 4, 8}, 81), randn64({2, 5, 8}, 82)});
      nn::TransformerEncoder encoder(o, 2, true);
      encoder.to(DType::float64).eval();
      check_module_gradients(encoder, [&](const Inputs& in) { return encoder.forward(in[0], padded); },
                             {randn64({2, 5, 8}, 83)});
      nn::TransformerDecoder decoder(o, 2, true);
      decoder.to(DType::float64).eval();
      check_module_gradients(decoder, [&](const Inputs& in) { return decoder.forward(in[0], in[1], causal, padded); },
                             {randn64({2, 4, 8}, 84), randn64({2, 5, 8}, 85)});
    }
  }
}

BOOST_AUTO_TEST_CASE(transformer_encoder_decoder) {
  nn::TransformerOptions o;
  o.d_model = 8;
  o.nhead = 2;
  o.num_encoder_layers = 1;
  o.num_decoder_layers = 2;
  o.dim_feedforward = 12;
  o.dropout = 0.0;
  nn::Transformer model(o);
  model.to(DType::float64);
  // PyTorch's names: encoder.layers.0..., decoder.layers.1.multihead_attn..., the final norms.
  const StateDict state = model.state_dict();
  for (const char* name :
       {"encoder.layers.0.self_attn.in_proj_weight", "encoder.norm.weight",
        "decoder.layers.1.multihead_attn.out_proj.weight", "decoder.layers.1.norm3.bias", "decoder.norm.bias"})
    BOOST_CHECK_MESSAGE(state.count(name) == 1, name);
  BOOST_CHECK_EQUAL(state.size(), 12u + 2u + 2u * 18u + 2u);  // layers of 12 and 18 tensors, two norms
  nn::AttentionArgs causal;
  causal.is_causal = true;
  check_module_gradients(model, [&](const Inputs& in) { return model.forward(in[0], in[1], {}, causal); },
                         {randn64({2, 5, 8}, 86), randn64({2, 3, 8}, 87)});
  // The decoder's output at position i depends on tgt up to i only.
  const Tensor src = randn64({1, 5, 8}, 88, false), tgt = randn64({1, 4, 8}, 89, false);
  const auto full = model.forward(src, tgt, {}, causal).to_vector();
  const auto prefix = model.forward(src, slice(tgt, 1, 0, 2), {}, causal).to_vector();
  check_close(prefix, std::vector<double>(full.begin(), full.begin() + 16), 1e-12);
  check_error([&] { model(src); }, {"Transformer", "needs src and tgt"});
  check_error([&] { model.decoder->layer(0)(tgt); }, {"TransformerDecoderLayer", "memory"});
}

BOOST_AUTO_TEST_CASE(layers_take_pytorchs_constructor_and_defaults) {
  nn::TransformerEncoderLayer encoder(16, 4);
  nn::TransformerDecoderLayer decoder(16, 4);
  BOOST_CHECK_EQUAL(encoder.options().dim_feedforward, 2048u);
  BOOST_CHECK(!encoder.options().norm_first);  // post-LN, as PyTorch
  BOOST_CHECK_EQUAL(encoder.options().dropout, 0.1);
  BOOST_CHECK(decoder.linear1->weight.shape() == (Shape{2048, 16}));
  // Post-LN and pre-LN share every name (so a state dict loads into either) yet compute
  // different functions: the option has to be set as the model was trained.
  nn::TransformerLayerOptions o;
  o.d_model = 8;
  o.nhead = 2;
  o.dropout = 0.0;
  nn::TransformerEncoderLayer post(o);
  o.norm_first = true;
  nn::TransformerEncoderLayer pre(o);
  pre.load_state_dict(post.state_dict());
  const Tensor x = Tensor::randn({2, 3, 8}, default_generator());
  const auto a = post(x).to_vector(), b = pre(x).to_vector();
  double largest = 0;
  for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::abs(a[i] - b[i]));
  BOOST_CHECK_GT(largest, 1e-3);
}
