#define BOOST_TEST_MODULE nn
#include "helpers.hpp"

#include <sstream>

#include "xgrad/nn/nn.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

namespace {

// A pre-LN residual block, to exercise nesting: x + ff(ln(x)).
class Block : public nn::Module {
 public:
  explicit Block(std::size_t d) {
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(d));
    ff = register_module("ff", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                                   std::make_shared<nn::Linear>(d, 2 * d), std::make_shared<nn::ReLU>(),
                                   std::make_shared<nn::Linear>(2 * d, d)}));
  }
  Tensor forward(const Tensor& x) override { return x + ff->forward(ln->forward(x)); }
  std::shared_ptr<nn::LayerNorm> ln;
  std::shared_ptr<nn::Sequential> ff;
};

class Model : public nn::Module {
 public:
  Model() {
    blocks = register_module("blocks", std::make_shared<nn::Sequential>());
    blocks->push_back(std::make_shared<Block>(4));
    blocks->push_back(std::make_shared<Block>(4));
    head = register_module("head", std::make_shared<nn::Linear>(4, 3));
    register_buffer("steps", Tensor::zeros({1}));
    register_buffer("scratch", Tensor::zeros({2}), /*persistent=*/false);
  }
  Tensor forward(const Tensor& x) override { return head->forward(blocks->forward(x)); }
  std::shared_ptr<nn::Sequential> blocks;
  std::shared_ptr<nn::Linear> head;
};

// The custom layer shown in the README.
class Affine : public nn::Module {
 public:
  explicit Affine(std::size_t d)
      : scale(register_parameter("scale", Tensor::ones({d}))), shift(register_parameter("shift", Tensor::zeros({d}))) {}
  Tensor forward(const Tensor& x) override { return x * scale + shift; }
  Tensor scale, shift;
};

std::vector<std::string> names_of(const nn::NamedTensors& named) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : named) names.push_back(name);
  return names;
}

}  // namespace

BOOST_AUTO_TEST_CASE(parameters_have_dotted_names_in_registration_order) {
  Model model;
  const std::vector<std::string> expected = {
      "blocks.0.ln.weight",   "blocks.0.ln.bias",   "blocks.0.ff.0.weight", "blocks.0.ff.0.bias",
      "blocks.0.ff.2.weight", "blocks.0.ff.2.bias", "blocks.1.ln.weight",   "blocks.1.ln.bias",
      "blocks.1.ff.0.weight", "blocks.1.ff.0.bias", "blocks.1.ff.2.weight", "blocks.1.ff.2.bias",
      "head.weight",          "head.bias"};
  BOOST_CHECK(names_of(model.named_parameters()) == expected);
  BOOST_CHECK_EQUAL(model.parameters().size(), expected.size());
  for (const Tensor& p : model.parameters()) BOOST_CHECK(p.requires_grad());
  // 2 blocks x (LN 8 + 4x8+8 + 8x4+4) + head 4x3+3
  BOOST_CHECK_EQUAL(model.num_parameters(), 2u * (8 + 40 + 36) + 15);
  BOOST_CHECK(names_of(model.named_buffers()) == (std::vector<std::string>{"steps", "scratch"}));
  const nn::StateDict state = model.state_dict();
  BOOST_CHECK_EQUAL(state.size(), expected.size() + 1);  // + the persistent buffer only
  BOOST_CHECK(state.count("steps") && !state.count("scratch"));
}

BOOST_AUTO_TEST_CASE(train_and_eval_are_recursive) {
  Model model;
  model.eval();
  BOOST_CHECK(!model.is_training() && !model.blocks->is_training() && !model.head->is_training());
  BOOST_CHECK(!(*model.blocks)[1].is_training());
  model.train();
  BOOST_CHECK(model.is_training() && (*model.blocks)[0].is_training());
}

BOOST_AUTO_TEST_CASE(to_dtype_converts_in_place_and_keeps_handles) {
  Model model;
  const Tensor weight_handle = model.head->weight;
  const auto before = weight_handle.to_vector();
  model.to(DType::float64);
  for (const Tensor& p : model.parameters()) BOOST_CHECK(p.dtype() == DType::float64);
  BOOST_CHECK(model.head->weight.dtype() == DType::float64);
  BOOST_CHECK(weight_handle.dtype() == DType::float64);  // the same node
  check_close(weight_handle.to_vector(), before, 1e-7);
  const Tensor y = model(randn64({2, 5, 4}, 1, false));
  BOOST_CHECK(y.dtype() == DType::float64 && y.shape() == (Shape{2, 5, 3}));
}

BOOST_AUTO_TEST_CASE(zero_grad_clears_every_parameter) {
  Model model;
  sum(model(Tensor::ones({2, 4}))).backward();
  for (const Tensor& p : model.parameters()) BOOST_CHECK(p.grad().defined());
  model.zero_grad();
  for (const Tensor& p : model.parameters()) BOOST_CHECK(!p.grad().defined());
}

BOOST_AUTO_TEST_CASE(state_dict_round_trip) {
  manual_seed(1);
  Model a;
  manual_seed(2);
  Model b;
  const Tensor x = Tensor::randn({3, 4}, default_generator());
  BOOST_CHECK(a(x).to_vector() != b(x).to_vector());
  b.load_state_dict(a.state_dict());
  BOOST_CHECK(a(x).to_vector() == b(x).to_vector());
  // Loading copied the values: changing a leaves b alone.
  a.head->weight.data<float>()[0] += 1.0f;
  BOOST_CHECK(a(x).to_vector() != b(x).to_vector());
}

BOOST_AUTO_TEST_CASE(load_errors_name_every_bad_entry_and_change_nothing) {
  Model model;
  nn::StateDict state = model.state_dict();
  const auto before = model.head->weight.to_vector();
  nn::StateDict bad;
  for (const auto& [name, t] : state) bad[name] = t.clone() + 1.0;
  bad.erase("head.bias");
  bad["head.extra"] = Tensor::zeros({1});
  bad["blocks.1.ln.weight"] = Tensor::zeros({5});
  check_error([&] { model.load_state_dict(bad); }, {"load_state_dict", "missing: head.bias", "unexpected: head.extra",
                                                    "shape mismatch: blocks.1.ln.weight expects [4], got [5]"});
  BOOST_CHECK(model.head->weight.to_vector() == before);
  // Non-strict loading skips missing and unexpected names, but never a wrong shape.
  bad["blocks.1.ln.weight"] = Tensor::ones({4});
  model.load_state_dict(bad, /*strict=*/false);
  BOOST_CHECK(model.head->weight.to_vector() != before);
}

BOOST_AUTO_TEST_CASE(printing_shows_the_tree_with_parameter_counts) {
  Model model;
  std::ostringstream os;
  os << model;
  const std::string text = os.str();
  for (const char* part : {"Model()  # 183 parameters", "(blocks): Sequential()", "(0): Block()  # 84 parameters",
                           "(ln): LayerNorm(4, eps=1e-05, elementwise_affine=true)  # 8 parameters",
                           "(0): Linear(in_features=4, out_features=8, bias=true)  # 40 parameters", "(1): ReLU()",
                           "(head): Linear(in_features=4, out_features=3, bias=true)"})
    BOOST_CHECK_MESSAGE(text.find(part) != std::string::npos, text << "\nlacks: " << part);
}

BOOST_AUTO_TEST_CASE(registration_errors) {
  class Twice : public nn::Module {
   public:
    Twice() {
      register_parameter("w", Tensor::zeros({1}));
      register_parameter("w", Tensor::zeros({1}));
    }
  };
  check_error([] { Twice t; }, {"Twice", "'w'", "already registered"});
  nn::Embedding table(3, 2);
  nn::Module& as_module = table;
  check_error([&] { as_module.forward(Tensor::zeros({2})); }, {"Embedding", "forward(Tensor)"});
  nn::Sequential empty;
  check_error([&] { empty[0]; }, {"Sequential", "index 0"});
}

BOOST_AUTO_TEST_CASE(initialization_follows_pytorch_and_the_seed) {
  manual_seed(7);
  nn::Linear a(16, 8);
  manual_seed(7);
  nn::Linear b(16, 8);
  BOOST_CHECK(a.weight.to_vector() == b.weight.to_vector());
  BOOST_CHECK(a.bias.to_vector() == b.bias.to_vector());
  for (double w : a.weight.to_vector()) BOOST_CHECK(std::abs(w) <= 0.25);  // 1 / sqrt(16)
  for (double w : a.bias.to_vector()) BOOST_CHECK(std::abs(w) <= 0.25);

  nn::LayerNorm norm(5);
  check_close(norm.weight.to_vector(), std::vector<double>(5, 1.0));
  check_close(norm.bias.to_vector(), std::vector<double>(5, 0.0));

  nn::Embedding table(200, 50);  // N(0, 1)
  const auto v = table.weight.to_vector();
  double mean = 0, square = 0;
  for (double e : v) mean += e, square += e * e;
  mean /= static_cast<double>(v.size());
  BOOST_CHECK_SMALL(mean, 0.05);
  BOOST_CHECK_CLOSE(std::sqrt(square / static_cast<double>(v.size()) - mean * mean), 1.0, 5.0);

  Tensor w = Tensor::zeros({30, 20});
  nn::init::xavier_uniform_(w);
  const double bound = std::sqrt(6.0 / 50.0);
  double largest = 0;
  for (double e : w.to_vector()) largest = std::max(largest, std::abs(e));
  BOOST_CHECK(largest <= bound && largest > 0.9 * bound);
  BOOST_CHECK_CLOSE(nn::init::calculate_gain(nn::init::Nonlinearity::relu), std::sqrt(2.0), 1e-12);
  check_error(
      [] {
        Tensor v1 = Tensor::zeros({3});
        nn::init::xavier_uniform_(v1);
      },
      {"fans", "[3]"});
}

// normal_ makes its values in one array; they are the bits randn * std + mean makes from
// the same generator, in either dtype (the product and the sum each rounded).
BOOST_AUTO_TEST_CASE(normal_is_randn_times_std_plus_mean_bit_for_bit) {
  for (const DType dtype : {DType::float32, DType::float64})
    for (const auto& [mean, std] : {std::pair{0.0, 0.02}, std::pair{1.0, 0.5}, std::pair{-3.25, 1.0 / 3.0}}) {
      Generator one(11), other(11);
      const Tensor made = Tensor::normal({37, 5}, mean, std, one, dtype);
      const Tensor reference = Tensor::randn({37, 5}, other, dtype) * std + mean;
      BOOST_CHECK(made.dtype() == dtype);
      BOOST_CHECK(made.to_vector() == reference.to_vector());
      BOOST_CHECK(one.normal() == other.normal());  // as many draws
      Tensor weight = Tensor::zeros({37, 5}, dtype);
      Generator third(11);
      nn::init::normal_(weight, mean, std, third);
      BOOST_CHECK(weight.to_vector() == reference.to_vector());
    }
  Generator g(3);
  BOOST_CHECK(Tensor::normal({4}, 2.5, 0.0, g).to_vector() == std::vector<double>(4, 2.5));
}

BOOST_AUTO_TEST_CASE(gradcheck_of_every_layer_through_the_module_api) {
  const Tensor x = randn64({2, 3, 4}, 10);
  nn::Linear linear(4, 5), linear_plain(4, 5, false);
  check_module_gradients(linear, [&](const Inputs& in) { return linear(in[0]); }, {x});
  check_module_gradients(linear_plain, [&](const Inputs& in) { return linear_plain(in[0]); }, {x});

  nn::LayerNorm norm(4);
  nn::init::normal_(norm.weight, 1.0, 0.5);  // away from the trivial ones/zeros
  nn::init::normal_(norm.bias, 0.0, 0.5);
  check_module_gradients(norm, [&](const Inputs& in) { return norm(in[0]); }, {x});

  nn::Embedding table(6, 3);
  const Indices ids({1, 5, 1, 0}, {2, 2});
  check_module_gradients(table, [&](const Inputs&) { return table(ids); }, {});

  nn::ReLU relu_layer;
  nn::GELU gelu_layer, gelu_tanh(true);
  nn::Softmax softmax_layer(1);
  nn::LogSoftmax log_softmax_layer(-1);
  for (nn::Module* m :
       std::initializer_list<nn::Module*>{&relu_layer, &gelu_layer, &gelu_tanh, &softmax_layer, &log_softmax_layer})
    check_module_gradients(*m, [m](const Inputs& in) { return m->forward(in[0]); }, {x});

  nn::Dropout drop(0.3);
  check_module_gradients(drop,
                         [&](const Inputs& in) {
                           manual_seed(3);  // the same mask on every call
                           return drop(in[0]);
                         },
                         {x});

  nn::PositionalEncoding sinusoid(4, 10);
  nn::PositionalEncoding sinusoid_seq_first(4, 10, 0.0, /*batch_first=*/false);
  nn::LearnedPositionalEncoding learned(10, 4);
  check_module_gradients(sinusoid, [&](const Inputs& in) { return sinusoid(in[0]); }, {x});
  check_module_gradients(sinusoid_seq_first, [&](const Inputs& in) { return sinusoid_seq_first(in[0]); }, {x});
  check_module_gradients(learned, [&](const Inputs& in) { return learned(in[0]); }, {x});

  nn::CrossEntropyLoss loss(0);
  nn::Linear classifier(4, 3);
  const Indices targets({2, 0, 1, 0, 1, 2}, {2, 3});
  check_module_gradients(classifier, [&](const Inputs& in) { return loss(classifier(in[0]), targets); }, {x});
}

BOOST_AUTO_TEST_CASE(gradcheck_of_a_two_layer_mlp) {
  nn::Sequential mlp{std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::GELU>(),
                     std::make_shared<nn::Linear>(8, 2)};
  check_module_gradients(mlp, [&](const Inputs& in) { return mlp(in[0]); }, {randn64({3, 4}, 11)});
  Model model;  // nested blocks with LayerNorm and residuals
  check_module_gradients(model, [&](const Inputs& in) { return model(in[0]); }, {randn64({2, 4}, 12)});
}

BOOST_AUTO_TEST_CASE(module_gradcheck_reports_the_parameter_name) {
  // A layer whose forward hides one use of its parameter from the graph.
  class Broken : public nn::Module {
   public:
    Broken() : w(register_parameter("w", Tensor::ones({2}))) {}
    Tensor forward(const Tensor& x) override { return x * w * w.detach(); }
    Tensor w;
  };
  Broken broken;
  check_error([&] { nn::gradcheck(broken, [&](const Inputs& in) { return broken(in[0]); }, {randn64({2}, 13)}); },
              {"gradcheck", "'w'"});
}

BOOST_AUTO_TEST_CASE(dropout_module_seeded_in_training_identity_in_eval) {
  nn::Dropout drop(0.5);
  const Tensor x = Tensor::ones({1000});
  manual_seed(42);
  const auto first = drop(x).to_vector();
  manual_seed(42);
  BOOST_CHECK(drop(x).to_vector() == first);
  const std::size_t zeros = static_cast<std::size_t>(std::count(first.begin(), first.end(), 0.0));
  BOOST_CHECK(zeros > 400 && zeros < 600);
  for (double v : first) BOOST_CHECK(v == 0.0 || v == 2.0);
  drop.eval();
  BOOST_CHECK(drop(x).node() == x.node());
  // Its own generator, independent of the global one.
  nn::Dropout own(0.5, std::make_shared<Generator>(9));
  nn::Dropout same(0.5, std::make_shared<Generator>(9));
  BOOST_CHECK(own(x).to_vector() == same(x).to_vector());
  check_error([] { nn::Dropout bad(1.0); }, {"Dropout", "outside [0, 1)"});
}

BOOST_AUTO_TEST_CASE(positional_encoding_values_and_layouts) {
  nn::PositionalEncoding pe(6, 50);
  const auto table = pe.pe.to_vector();
  BOOST_CHECK_CLOSE(table[3 * 6 + 0], std::sin(3.0), 1e-4);                               // pos 3, i = 0
  BOOST_CHECK_CLOSE(table[3 * 6 + 3], std::cos(3.0 / std::pow(10000.0, 2.0 / 6)), 1e-4);  // pos 3, 2i+1 = 3
  const Tensor zeros = Tensor::zeros({2, 5, 6});
  const Tensor batch_first = pe(zeros);
  nn::PositionalEncoding seq_first(6, 50, 0.0, false);
  const Tensor sequence_first = seq_first(Tensor::zeros({5, 2, 6}));
  // The same position gets the same vector in both layouts.
  check_close(slice(slice(batch_first, 0, 1, 2), 1, 4, 5).to_vector(),
              slice(slice(sequence_first, 0, 4, 5), 1, 1, 2).to_vector());
  BOOST_CHECK(pe.state_dict().empty());  // the table is rebuilt, not saved
  check_error([&] { pe(Tensor::zeros({1, 51, 6})); }, {"PositionalEncoding", "51", "max_len 50"});
  check_error([&] { pe(Tensor::zeros({1, 5, 4})); }, {"PositionalEncoding", "[1, 5, 4]", "d_model 6"});
}

BOOST_AUTO_TEST_CASE(readme_custom_layer) {
  Affine affine(3);
  BOOST_CHECK(names_of(affine.named_parameters()) == (std::vector<std::string>{"scale", "shift"}));
  check_module_gradients(affine, [&](const Inputs& in) { return affine(in[0]); }, {randn64({2, 3}, 14)});
}

// ---- Embedding's options (the op and the layer) ----

namespace {

// 1 where the id is not `padding`, [..., 1]: how a model masks its padded positions.
Tensor keep_mask(const Indices& ids, std::int64_t padding) {
  std::vector<double> keep;
  for (const std::int64_t id : ids.values) keep.push_back(id != padding);
  Shape shape = ids.shape;
  shape.push_back(1);
  return Tensor::from_vector(keep, shape, DType::float64);
}

// Row r of a [rows, d] tensor's values.
std::vector<double> row_of(const Tensor& t, std::size_t r) {
  const std::size_t d = t.shape()[1];
  const auto v = t.to_vector();
  return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(r * d),
                             v.begin() + static_cast<std::ptrdiff_t>((r + 1) * d));
}

std::vector<double> scaled(std::vector<double> v, double s) {
  for (double& x : v) x *= s;
  return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(embedding_padding_idx_passes_no_gradient) {
  const Tensor w = randn64({5, 3}, 30);
  const Indices ids({1, 4, 2, 4, 0, 1}, {2, 3});
  const Tensor out = embedding(w, ids, {.padding_idx = 4});
  check_close(row_of(reshape(out, {6, 3}), 1), row_of(w, 4));  // the forward still reads the row
  out.backward(Tensor::ones(out.shape(), DType::float64));
  check_close(row_of(w.grad(), 4), {0, 0, 0});
  check_close(row_of(w.grad(), 1), {2, 2, 2});
  // Exact wherever the padded positions are masked out, as a model masks them; -1 is row 4.
  const Tensor keep = keep_mask(ids, 4);
  for (const std::int64_t padding : {4, -1})
    check_gradients([&](const Inputs& in) { return embedding(in[0], ids, {.padding_idx = padding}) * keep; }, {w});
}

BOOST_AUTO_TEST_CASE(embedding_max_norm_renormalises_the_rows_looked_up_in_place) {
  // Rows of L2 norm 5, 0.5, 0.5, 2, 1.5 and 2; max_norm 1 with ids 0, 2 and 5.
  const std::vector<double> table = {3, 4, 0, 0, 0.3, 0.4, 0, 0, 0, 0, 0.3, -0.4,
                                     1, 1, 1, 1, 1.5, 0,   0, 0, 0, 0, -2,  0};
  const Indices ids({0, 2, 2, 5}, {2, 2});
  Tensor w = Tensor::from_vector(table, {6, 4}, DType::float64, true);
  const Tensor out = embedding(w, ids, {.max_norm = 1.0});
  const Tensor before = Tensor::from_vector(table, {6, 4}, DType::float64);
  check_close(row_of(w, 0), scaled(row_of(before, 0), 1.0 / (5.0 + 1e-7)));  // as torch.embedding_renorm_
  check_close(row_of(w, 5), scaled(row_of(before, 5), 1.0 / (2.0 + 1e-7)));
  BOOST_CHECK(row_of(w, 2) == row_of(before, 2));  // within max_norm
  BOOST_CHECK(row_of(w, 3) == row_of(before, 3));  // not looked up
  check_close(row_of(reshape(out, {4, 4}), 0), row_of(w, 0));
  // The gradient is the lookup's on the new table: none flows through the renorm.
  const Tensor g = randn64({2, 2, 4}, 31, false);
  out.backward(g);
  Tensor plain_w = w.detach().clone().requires_grad_();
  embedding(plain_w, ids).backward(g);
  BOOST_CHECK(w.grad().to_vector() == plain_w.grad().to_vector());
  // Gradcheck on the renormalised table: its rows sit 1e-7 / norm inside max_norm, so
  // steps of 1e-9 leave them alone, and the op is the lookup there.
  GradcheckOptions small_steps;
  small_steps.eps = 1e-9;
  try {
    BOOST_CHECK(
        gradcheck([&](const Inputs& in) { return embedding(in[0], ids, {.max_norm = 1.0}); }, {plain_w}, small_steps));
  } catch (const Error& e) {
    BOOST_ERROR(e.what());
  }
  // Other norms: the largest magnitude (inf) and the sum of magnitudes (1).
  Tensor w_inf = Tensor::from_vector(table, {6, 4}, DType::float64);
  embedding(w_inf, ids, {.max_norm = 1.0, .norm_type = INFINITY});
  check_close(row_of(w_inf, 0), scaled(row_of(before, 0), 1.0 / (4.0 + 1e-7)));
  Tensor w_l1 = Tensor::from_vector(table, {6, 4}, DType::float64);
  embedding(w_l1, ids, {.max_norm = 1.0, .norm_type = 1.0});
  check_close(row_of(w_l1, 0), scaled(row_of(before, 0), 1.0 / (7.0 + 1e-7)));
  BOOST_CHECK(row_of(w_l1, 2) == row_of(before, 2));  // L1 norm 0.7
  // In float32 too.
  Tensor w32 = Tensor::from_vector(table, {6, 4});
  embedding(w32, ids, {.max_norm = 1.0});
  check_close(row_of(w32, 0), scaled(row_of(before, 0), 1.0 / (5.0 + 1e-7)), 1e-6);
}

BOOST_AUTO_TEST_CASE(embedding_scale_grad_by_freq_divides_by_the_count) {
  const Tensor w = randn64({5, 3}, 32);
  // Each id once: the option changes nothing and the gradient is exact.
  const Indices distinct({3, 0, 4, 1}, {2, 2});
  check_gradients([&](const Inputs& in) { return embedding(in[0], distinct, {.scale_grad_by_freq = true}); }, {w});
  // Repeated ids: each row's gradient is the plain lookup's (gradchecked) over its count.
  // That is not the derivative of the forward (it is meant not to be), so it is checked
  // against the exact gradient instead of finite differences.
  const Indices ids({1, 3, 1, 1, 0, 3}, {2, 3});
  check_gradients([&](const Inputs& in) { return embedding(in[0], ids); }, {w});
  const Tensor g = randn64({2, 3, 3}, 33, false);
  Tensor plain = w.detach().clone().requires_grad_(), by_freq = w.detach().clone().requires_grad_();
  embedding(plain, ids).backward(g);
  embedding(by_freq, ids, {.scale_grad_by_freq = true}).backward(g);
  const double counts[] = {1, 3, 0, 2, 0};
  for (std::size_t r = 0; r < 5; ++r)
    check_close(row_of(by_freq.grad(), r), scaled(row_of(plain.grad(), r), counts[r] ? 1.0 / counts[r] : 0.0));
  // With a padding id as well: it gets nothing, the others as before.
  Tensor padded = w.detach().clone().requires_grad_();
  embedding(padded, ids, {.padding_idx = 3, .scale_grad_by_freq = true}).backward(g);
  check_close(row_of(padded.grad(), 3), {0, 0, 0});
  check_close(row_of(padded.grad(), 1), row_of(by_freq.grad(), 1));
}

BOOST_AUTO_TEST_CASE(embedding_option_errors) {
  const Tensor w = randn64({4, 2}, 34);
  const Indices ids({1, 2}, {2});
  check_error([&] { embedding(w, ids, {.padding_idx = 4}); }, {"embedding", "padding_idx 4", "[-4, 4)", "[4, 2]"});
  check_error([&] { embedding(w, ids, {.padding_idx = -5}); }, {"embedding", "padding_idx -5"});
  check_error([&] { embedding(w, ids, {.max_norm = -1.0}); }, {"embedding", "max_norm", "-1.0"});
  check_error([&] { embedding(w, ids, {.max_norm = NAN}); }, {"embedding", "max_norm", "nan"});
  check_error([&] { embedding(w, ids, {.max_norm = 1.0, .norm_type = 0.0}); }, {"embedding", "norm_type", "0.0"});
  check_error([&] { embedding(w, Indices({4}, {1}), {.max_norm = 1.0}); }, {"embedding", "id 4"});
  check_error([] { nn::Embedding(3, 2, {.padding_idx = 3}); }, {"Embedding", "padding_idx 3", "3 embeddings"});
  check_error([] { nn::Embedding(3, 2, {.max_norm = -2.0}); }, {"Embedding", "max_norm", "-2.0"});
  check_error([] { nn::Embedding(3, 2, {.norm_type = -1.0}); }, {"Embedding", "norm_type"});
}

BOOST_AUTO_TEST_CASE(embedding_layer_with_options) {
  manual_seed(3);
  nn::Embedding table(5, 3, {.padding_idx = -1});
  BOOST_CHECK_EQUAL(*table.options.padding_idx, 4);
  check_close(row_of(table.weight, 4), {0, 0, 0});  // as PyTorch initialises it
  for (double v : row_of(table.weight, 0)) BOOST_CHECK(v != 0.0);
  BOOST_CHECK_EQUAL(table.extra_repr(), "5, 3, padding_idx=4");
  nn::Embedding all(6, 2, {.padding_idx = 0, .max_norm = 1.5, .norm_type = 1.0, .scale_grad_by_freq = true});
  BOOST_CHECK_EQUAL(all.extra_repr(), "6, 2, padding_idx=0, max_norm=1.5, norm_type=1.0, scale_grad_by_freq=true");
  BOOST_CHECK_EQUAL(nn::Embedding(6, 2).extra_repr(), "6, 2");
  // Through the module API, padded positions masked out as a model does.
  const Indices ids({0, 2, 4, 4, 1, 2}, {2, 3});
  const Tensor keep = keep_mask(ids, 4);
  check_module_gradients(table, [&](const Inputs&) { return table(ids) * keep; }, {});
  // max_norm: one forward renormalises, then the lookup's gradient (steps of 1e-9 as above).
  nn::Embedding bounded(5, 3, {.max_norm = 0.5});
  bounded.to(DType::float64);
  bounded(ids);
  for (std::size_t r : {0, 1, 2, 4}) {
    double norm = 0;
    for (double v : row_of(bounded.weight, r)) norm += v * v;
    BOOST_CHECK_LE(std::sqrt(norm), 0.5);
  }
  GradcheckOptions small_steps;
  small_steps.eps = 1e-9;
  try {
    BOOST_CHECK(nn::gradcheck(
        bounded, [&](const Inputs&) { return bounded(ids); }, {}, small_steps));
  } catch (const Error& e) {
    BOOST_ERROR(e.what());
  }
}

// ---- LayerNorm over several axes, RMSNorm ----

BOOST_AUTO_TEST_CASE(layer_norm_and_rms_norm_layers_over_several_axes) {
  const Tensor x = randn64({2, 3, 4}, 35);
  nn::LayerNorm norm(Shape{3, 4});
  BOOST_CHECK(norm.weight.shape() == (Shape{3, 4}) && norm.bias.shape() == (Shape{3, 4}));
  check_close(norm.weight.to_vector(), std::vector<double>(12, 1.0));
  check_close(norm.bias.to_vector(), std::vector<double>(12, 0.0));
  BOOST_CHECK_EQUAL(norm.extra_repr(), "[3, 4], eps=1e-05, elementwise_affine=true");
  BOOST_CHECK_EQUAL(nn::LayerNorm(4).extra_repr(), "4, eps=1e-05, elementwise_affine=true");
  nn::init::normal_(norm.weight, 1.0, 0.5);
  nn::init::normal_(norm.bias, 0.0, 0.5);
  check_module_gradients(norm, [&](const Inputs& in) { return norm(in[0]); }, {x});
  check_close(norm(x).to_vector(), layer_norm(x, norm.weight, norm.bias).to_vector());
  nn::LayerNorm plain({2, 3, 4}, 1e-3, false);
  BOOST_CHECK(plain.named_parameters().empty());
  check_module_gradients(plain, [&](const Inputs& in) { return plain(in[0]); }, {x});

  nn::RMSNorm rms(Shape{3, 4});
  BOOST_CHECK(names_of(rms.named_parameters()) == std::vector<std::string>{"weight"});
  check_close(rms.weight.to_vector(), std::vector<double>(12, 1.0));
  BOOST_CHECK(!rms.eps);
  BOOST_CHECK_EQUAL(rms.extra_repr(), "[3, 4], eps=None, elementwise_affine=true");
  nn::init::normal_(rms.weight, 1.0, 0.5);
  check_module_gradients(rms, [&](const Inputs& in) { return rms(in[0]); }, {x});
  check_close(rms(x).to_vector(), rms_norm(x, {3, 4}, rms.weight).to_vector());
  nn::RMSNorm rms_plain(4, 1e-6, false);
  BOOST_CHECK_EQUAL(rms_plain.extra_repr(), "4, eps=1e-06, elementwise_affine=false");
  BOOST_CHECK(rms_plain.named_parameters().empty());
  check_module_gradients(rms_plain, [&](const Inputs& in) { return rms_plain(in[0]); }, {x});

  check_error([&] { norm(Tensor::zeros({2, 4, 3}, DType::float64)); }, {"LayerNorm", "[2, 4, 3]", "[3, 4]"});
  check_error([&] { rms(Tensor::zeros({4}, DType::float64)); }, {"RMSNorm", "[4]", "[3, 4]"});
  check_error([] { nn::LayerNorm(Shape{}); }, {"LayerNorm", "normalized_shape"});
  check_error([] { nn::RMSNorm(Shape{}); }, {"RMSNorm", "normalized_shape"});
  check_error([] { nn::RMSNorm(4, 0.0); }, {"RMSNorm", "eps"});
}

BOOST_AUTO_TEST_CASE(cross_entropy_loss_module_holds_its_options) {
  CrossEntropyOptions options;
  options.weight = Tensor::from_vector({1.0, 2.0, 0.5}, {3});
  options.label_smoothing = 0.1;
  options.reduction = Reduction::sum;
  nn::CrossEntropyLoss loss(options);
  // The class weight is a buffer, as in PyTorch: saved, and converted by to().
  BOOST_CHECK(loss.state_dict().count("weight") == 1);
  loss.to(DType::float64);
  BOOST_CHECK(loss.options.weight.dtype() == DType::float64);
  const Tensor x = Tensor::from_vector({0.1, 0.9, -0.3, 1.2, 0.0, 0.4}, {2, 3}, DType::float64);
  const Indices t({1, 2}, {2});
  BOOST_CHECK_EQUAL(loss(x, t).item(), cross_entropy(x, t, loss.options).item());
  BOOST_CHECK_EQUAL(loss.extra_repr(), "reduction=sum, label_smoothing=0.1");
  const Tensor q = softmax(x);
  BOOST_CHECK_EQUAL(loss(x, q).item(), cross_entropy(x, q, loss.options).item());
}
