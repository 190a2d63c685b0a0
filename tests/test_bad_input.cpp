#define BOOST_TEST_MODULE bad_input
// Bad input through the public API, one table: every case must throw xgrad::Error whose
// message names the op and the offending shapes or values, and leave the objects it
// touched usable (checked after every case by a forward, backward and optimizer step).
#include "helpers.hpp"

#include <filesystem>
#include <fstream>
#include <limits>

#include "xgrad/autograd/xtensor.hpp"
#include "xgrad/nn/nn.hpp"
#include "xgrad/optim/optim.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {

// The objects the cases misuse, shared so that "still usable" means something.
struct World {
  Tensor a = randn64({2, 3}, 1), b = randn64({4, 5}, 2), v = randn64({3}, 3);
  Tensor a32 = randn64({2, 3}, 4, false).to(DType::float32);
  nn::MultiHeadAttention attention{8, 2};
  nn::Sequential model{std::make_shared<nn::Linear>(8, 8), std::make_shared<nn::LayerNorm>(8)};
  optim::Adam adam{model.named_parameters(), {.lr = 1e-3}};
  std::string checkpoint = (std::filesystem::temp_directory_path() / "xgrad-bad-input.safetensors").string();

  World() { nn::save(checkpoint, model, &adam); }

  // A training step through everything the cases touched.
  void check_usable() {
    const Tensor x = Tensor::randn({2, 3, 8}, default_generator());
    adam.zero_grad();
    Tensor loss = mean(pow(model(attention(x)), 2.0));
    loss.backward();
    adam.step();
    BOOST_CHECK(std::isfinite(loss.item()));
    Tensor tensors = sum(a * a) + sum(v);  // the float64 tensors the cases misused
    tensors.backward();
    BOOST_CHECK(a.grad().defined() && v.grad().defined());
    a.zero_grad();
    v.zero_grad();
  }
};

// Operands of 2^20 elements (8 MiB in float64) whose broadcast has 2^40: 8 TiB in float64,
// 4 TiB in float32, more than any machine the tests run on can hold. Ops must refuse it
// with an Error naming them and the shape, never std::bad_alloc or the OOM killer.
constexpr std::size_t kLong = std::size_t{1} << 20;
Tensor tall_column(DType dtype = DType::float64) { return Tensor::zeros({kLong, 1}, dtype); }
Tensor long_row(DType dtype = DType::float64) { return Tensor::zeros({1, kLong}, dtype); }

struct Case {
  const char* name;
  std::function<void(World&)> call;
  std::vector<std::string> expect;  // substrings of the message
};

std::vector<Case> cases() {
  const double nan = std::numeric_limits<double>::quiet_NaN();  // captured by value: the cases outlive this call
  // A table, one case per line: kept as written.
  // clang-format off
  return {
      // ---- autograd: shapes ----
      {"add shapes", [](World& w) { add(w.a, w.b); }, {"add", "[2, 3]", "[4, 5]"}},
      {"sub shapes", [](World& w) { sub(w.a, w.b); }, {"sub", "[2, 3]", "[4, 5]"}},
      {"mul shapes", [](World& w) { mul(w.a, w.b); }, {"mul", "[2, 3]", "[4, 5]"}},
      {"div shapes", [](World& w) { div(w.a, w.b); }, {"div", "[2, 3]", "[4, 5]"}},
      {"pow shapes", [](World& w) { pow(w.a, w.b); }, {"pow", "[2, 3]", "[4, 5]"}},
      {"compare shapes", [](World& w) { lt(w.a, w.b); }, {"lt", "[2, 3]", "[4, 5]"}},
      {"where shapes", [](World& w) { where(w.a, w.a, w.b); }, {"where", "[2, 3]", "[4, 5]"}},
      {"masked_fill mask too big", [](World& w) { masked_fill(w.v, w.a, 0); }, {"masked_fill", "[2, 3]", "[3]"}},
      {"matmul inner", [](World& w) { matmul(w.a, w.b); }, {"matmul", "[2, 3]", "[4, 5]", "3 and 4"}},
      {"matmul batch", [](World&) { matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 4})); }, {"matmul", "batch", "[2, 2, 3]"}},
      {"matmul 1-D transposed", [](World& w) { matmul(w.v, w.a, true); }, {"matmul", "1-D", "[3]"}},
      {"linear input", [](World& w) { linear(w.a, w.b); }, {"linear", "[2, 3]", "[4, 5]"}},
      {"linear bias", [](World&) { linear(Tensor::zeros({2, 4}), Tensor::zeros({5, 4}), Tensor::zeros({3})); }, {"linear", "bias", "[3]"}},
      {"layer_norm weight", [](World& w) { layer_norm(w.a, w.b); }, {"layer_norm", "weight", "[4, 5]", "[2, 3]"}},
      {"layer_norm eps", [](World& w) { layer_norm(w.a, Tensor(), Tensor(), -1.0); }, {"layer_norm", "eps"}},
      {"layer_norm trailing axes", [](World& w) { layer_norm(w.a, {3, 2}); }, {"layer_norm", "[2, 3]", "[3, 2]"}},
      {"layer_norm bias shape", [](World& w) { layer_norm(w.a, {3}, Tensor(), w.a); }, {"layer_norm", "bias", "[2, 3]", "[3]"}},
      {"rms_norm trailing axes", [](World& w) { rms_norm(w.a, {2}); }, {"rms_norm", "[2, 3]", "[2]"}},
      {"rms_norm weight", [](World& w) { rms_norm(w.a, {3}, randn64({4}, 9)); }, {"rms_norm", "weight", "[4]", "[3]"}},
      {"rms_norm eps", [nan](World& w) { rms_norm(w.a, {3}, w.v, nan); }, {"rms_norm", "eps", "nan"}},
      {"softmax axis", [](World& w) { softmax(w.a, 2); }, {"softmax", "axis 2", "[2, 3]"}},
      {"log_softmax scalar", [](World&) { log_softmax(Tensor::scalar(1.0)); }, {"log_softmax", "scalar"}},
      {"sum axis", [](World& w) { sum(w.a, {-3}); }, {"sum", "axis -3", "[2, 3]"}},
      {"mean axis twice", [](World& w) { mean(w.a, {1, -1}); }, {"mean", "twice", "[2, 3]"}},
      {"max of nothing", [](World&) { max(Tensor::zeros({0, 2}), {0}); }, {"max", "empty", "[0, 2]"}},
      {"reshape count", [](World& w) { reshape(w.a, {4, 2}); }, {"reshape", "[2, 3]", "[4, 2]"}},
      {"reshape two -1", [](World& w) { reshape(w.a, {-1, -1}); }, {"reshape", "-1"}},
      {"permute axes", [](World& w) { permute(w.a, {0}); }, {"permute", "[2, 3]"}},
      {"transpose axis", [](World& w) { transpose(w.a, 0, 5); }, {"transpose", "axis 5", "[2, 3]"}},
      {"slice start", [](World& w) { slice(w.a, 1, 4, 5); }, {"slice", "start 4", "[2, 3]"}},
      {"concat shapes", [](World& w) { concat({w.a, w.b}, 0); }, {"concat", "[4, 5]", "[2, 3]"}},
      {"split sizes", [](World& w) { split(w.a, {1, 1}, 1); }, {"split", "[2, 3]", "add up to 2"}},
      {"split sizes that wrap past 2^64", [](World& w) { split(w.a, {2, SIZE_MAX}, 1); },
       {"split", "[2, 3]", "more than 2^64"}},
      {"chunk", [](World& w) { chunk(w.a, 2, 1); }, {"chunk", "[2, 3]", "2 equal pieces"}},
      {"squeeze", [](World& w) { squeeze(w.a, 0); }, {"squeeze", "[2, 3]", "size 2"}},
      {"expand", [](World& w) { expand(w.a, {2, 4}); }, {"expand", "[2, 3]", "[2, 4]"}},
      // ---- autograd: broadcasts past memory (small operands, an 8 TiB output) ----
      {"add past memory", [](World&) { add(tall_column(), long_row()); }, {"add", "cannot allocate", "[1048576, 1048576] float64", "memory this process can have"}},
      {"add past memory, recording", [](World&) { tall_column().requires_grad_() + long_row().requires_grad_(); }, {"add", "[1048576, 1048576] float64", "memory this process can have"}},
      {"sub past memory", [](World&) { sub(long_row(), tall_column()); }, {"sub", "[1048576, 1048576] float64", "memory this process can have"}},
      {"mul past memory", [](World&) { mul(tall_column(), long_row()); }, {"mul", "[1048576, 1048576] float64", "memory this process can have"}},
      {"mul float32 past memory", [](World&) { mul(tall_column(DType::float32), long_row(DType::float32)); }, {"mul", "[1048576, 1048576] float32", "memory this process can have"}},
      {"div past memory", [](World&) { div(tall_column(), long_row()); }, {"div", "[1048576, 1048576] float64", "memory this process can have"}},
      {"pow past memory", [](World&) { pow(tall_column(), long_row()); }, {"pow", "[1048576, 1048576] float64", "memory this process can have"}},
      {"maximum past memory", [](World&) { maximum(tall_column(), long_row()); }, {"maximum", "[1048576, 1048576] float64", "memory this process can have"}},
      {"minimum past memory", [](World&) { minimum(tall_column(), long_row()); }, {"minimum", "[1048576, 1048576] float64", "memory this process can have"}},
      {"eq past memory", [](World&) { eq(tall_column(), long_row()); }, {"eq", "[1048576, 1048576] float64", "memory this process can have"}},
      {"lt float32 past memory", [](World&) { lt(tall_column(DType::float32), long_row(DType::float32)); }, {"lt", "[1048576, 1048576] float32", "memory this process can have"}},
      {"where operands past memory", [](World&) { where(tall_column(), tall_column(), long_row()); }, {"where", "[1048576, 1048576] float64", "memory this process can have"}},
      {"where condition past memory", [](World&) { where(long_row(), tall_column(), tall_column()); }, {"where", "[1048576, 1048576] float64", "memory this process can have"}},
      {"expand past memory", [](World&) { expand(tall_column(), {kLong, kLong}); }, {"expand", "[1048576, 1048576] float64", "memory this process can have"}},
      // ---- autograd: dtypes and values ----
      {"dtype mix", [](World& w) { add(w.a, w.a32); }, {"add", "float64", "float32", "[2, 3]"}},
      {"matmul dtype mix", [](World& w) { matmul(w.a32, transpose(w.a, 0, 1)); }, {"matmul", "float32", "float64"}},
      {"embedding id", [](World&) { embedding(Tensor::zeros({4, 2}), Indices({1, 7}, {2})); }, {"embedding", "id 7", "[4, 2]"}},
      {"embedding negative id", [](World&) { embedding(Tensor::zeros({4, 2}), Indices({-1}, {1})); }, {"embedding", "id -1"}},
      {"embedding padding_idx", [](World&) { embedding(Tensor::zeros({4, 2}), Indices({1}, {1}), {.padding_idx = 4}); }, {"embedding", "padding_idx 4", "[4, 2]"}},
      {"embedding max_norm", [](World&) { embedding(Tensor::zeros({4, 2}), Indices({1}, {1}), {.max_norm = -1.0}); }, {"embedding", "max_norm", "-1.0"}},
      {"embedding norm_type", [](World&) { embedding(Tensor::zeros({4, 2}), Indices({1}, {1}), {.max_norm = 1.0, .norm_type = 0.0}); }, {"embedding", "norm_type"}},
      {"cross_entropy target", [](World& w) { cross_entropy(w.a, Indices({0, 3}, {2})); }, {"cross_entropy", "target 3", "[2, 3]"}},
      {"cross_entropy shapes", [](World& w) { cross_entropy(w.a, Indices({0}, {1})); }, {"cross_entropy", "[1]", "[2, 3]"}},
      {"dropout p = 1", [](World& w) { dropout(w.a, 1.0, true, default_generator()); }, {"dropout", "1.0", "[0, 1)"}},
      {"dropout p NaN", [nan](World& w) { dropout(w.a, nan, true, default_generator()); }, {"dropout", "nan"}},
      {"attention widths", [](World& w) { scaled_dot_product_attention(w.a, w.b, w.b); }, {"scaled_dot_product_attention", "[2, 3]", "[4, 5]"}},
      {"attention mask", [](World&) {
         AttentionOptions o;
         o.mask = Tensor::ones({3, 3});
         scaled_dot_product_attention(Tensor::zeros({2, 4}), Tensor::zeros({5, 4}), Tensor::zeros({5, 4}), o);
       }, {"scaled_dot_product_attention", "mask of shape [3, 3]", "[..., 2, 5]"}},
      {"attention dropout", [](World& w) {
         AttentionOptions o;
         o.dropout_p = 2.0;
         scaled_dot_product_attention(w.a, w.a, w.a, o);
       }, {"scaled_dot_product_attention", "dropout_p"}},
      {"attention scale NaN", [nan](World& w) {
         AttentionOptions o;
         o.scale = nan;
         scaled_dot_product_attention(w.a, w.a, w.a, o);
       }, {"scaled_dot_product_attention", "scale", "nan"}},
      {"attention scale infinite", [](World& w) {
         AttentionOptions o;
         o.scale = std::numeric_limits<double>::infinity();
         scaled_dot_product_attention(w.a, w.a, w.a, o);
       }, {"scaled_dot_product_attention", "scale", "inf"}},
      {"Indices count", [](World&) { Indices({1, 2, 3}, {2, 2}); }, {"Indices", "3 values", "[2, 2]"}},
      {"from_vector count", [](World&) { Tensor::from_vector({1, 2}, {3}); }, {"from_vector", "2 values", "[3]"}},
      {"item of many", [](World& w) { w.a.item(); }, {"item", "[2, 3]"}},
      {"data of another dtype", [](World& w) { w.a.data<float>(); }, {"data", "float32", "float64"}},
      {"as_xarray dtype", [](World& w) { as_xarray<float>(w.a); }, {"as_xarray", "float32", "float64"}},
      {"requires_grad_ on a result", [](World& w) { (w.a * 2.0).requires_grad_(false); }, {"requires_grad_", "mul_scalar"}},
      {"empty slice of a scalar", [](World&) { slice(Tensor::scalar(1.0), 0, 0, 1); }, {"slice", "axis 0", "[]"}},
      // ---- autograd: the engine ----
      {"backward without seed", [](World& w) { (w.a * 2.0).backward(); }, {"backward", "[2, 3]", "seed"}},
      {"backward seed shape", [](World& w) { (w.a * 2.0).backward(Tensor::ones({3, 2}, DType::float64)); }, {"backward", "[3, 2]", "[2, 3]"}},
      {"backward twice", [](World& w) {
         Tensor y = sum(exp(w.a));
         y.backward();
         w.a.zero_grad();
         y.backward();
       }, {"backward", "freed", "retain_graph"}},
      {"backward without grad", [](World&) { sum(Tensor::ones({2})).backward(); }, {"backward", "does not require grad"}},
      {"anomaly NaN", [](World& w) {
         AnomalyModeGuard guard;
         log(w.a - 10.0);
       }, {"anomaly", "log", "forward", "[2, 3]"}},
      {"anomaly in backward", [](World&) {
         AnomalyModeGuard guard;
         Tensor z = Tensor::zeros({2}, DType::float64).requires_grad_();
         sum(sqrt(z)).backward();
       }, {"anomaly", "sqrt", "backward"}},
      // ---- nn ----
      {"heads not dividing", [](World&) { nn::MultiHeadAttention(10, 3); }, {"MultiHeadAttention", "num_heads 3", "dim_k 10"}},
      {"attention input width", [](World& w) { w.attention(Tensor::zeros({2, 3, 6})); }, {"MultiHeadAttention", "embed_dim 8", "[2, 3, 6]"}},
      {"key_padding_mask shape", [](World& w) {
         nn::AttentionArgs args;
         args.key_padding_mask = Tensor::zeros({2, 5});
         const Tensor x = Tensor::zeros({2, 3, 8});
         w.attention.forward(x, x, x, args);
       }, {"MultiHeadAttention", "key_padding_mask of shape [2, 5]", "[2, 3]"}},
      {"attn_mask shape", [](World& w) {
         nn::AttentionArgs args;
         args.attn_mask = Tensor::ones({4, 4});
         const Tensor x = Tensor::zeros({2, 3, 8});
         w.attention.forward(x, x, x, args);
       }, {"MultiHeadAttention", "attn_mask of shape [4, 4]"}},
      {"float mask given as PyTorch's boolean attn_mask", [](World& w) {
         nn::AttentionArgs args;
         args.attn_mask = masked_fill(Tensor::zeros({3, 3}), triu(Tensor::ones({3, 3}), 1), -INFINITY);
         const Tensor x = Tensor::zeros({2, 3, 8});
         w.attention.forward(x, x, x, args);
       }, {"MultiHeadAttention", "attn_mask holds -inf", "attn_bias"}},
      {"key_padding_mask not boolean", [](World& w) {
         nn::AttentionArgs args;
         args.key_padding_mask = Tensor::full({2, 3}, 0.5);
         const Tensor x = Tensor::zeros({2, 3, 8});
         w.attention.forward(x, x, x, args);
       }, {"MultiHeadAttention", "key_padding_mask holds 0.5", "key_padding_bias"}},
      {"attention mask dtype and rank", [](World& w) {
         nn::AttentionArgs args;
         args.attn_bias = Tensor::ones({1, 1, 1, 1, 3});
         const Tensor x = Tensor::zeros({2, 3, 8});
         w.attention.forward(x, x, x, args);
       }, {"MultiHeadAttention", "attn_bias of shape [1, 1, 1, 1, 3]"}},
      {"Dropout layer p", [](World&) { nn::Dropout(1.5); }, {"Dropout", "1.5"}},
      {"LayerNorm width", [](World& w) { w.model(Tensor::zeros({2, 4})); }, {"linear", "[2, 4]", "[8, 8]"}},
      {"LayerNorm alone", [](World&) { nn::LayerNorm(5)(Tensor::zeros({2, 4})); }, {"LayerNorm", "[2, 4]", "5"}},
      {"LayerNorm axes", [](World&) { nn::LayerNorm(Shape{4, 5})(Tensor::zeros({2, 5, 4})); }, {"LayerNorm", "[2, 5, 4]", "[4, 5]"}},
      {"RMSNorm alone", [](World&) { nn::RMSNorm(5)(Tensor::zeros({2, 4})); }, {"RMSNorm", "[2, 4]", "[5]"}},
      {"RMSNorm eps", [](World&) { nn::RMSNorm(5, -1.0); }, {"RMSNorm", "eps", "-1.0"}},
      {"Embedding padding_idx", [](World&) { nn::Embedding(3, 2, {.padding_idx = -4}); }, {"Embedding", "padding_idx -4", "3 embeddings"}},
      {"positions too long", [](World&) { nn::PositionalEncoding(4, 8)(Tensor::zeros({1, 9, 4})); }, {"PositionalEncoding", "9", "max_len 8"}},
      {"load another model", [](World& w) { w.model.load_state_dict(nn::Linear(3, 3).state_dict()); }, {"load_state_dict", "missing", "unexpected"}},
      {"load wrong shape", [](World& w) {
         StateDict s = w.model.state_dict();
         s["0.weight"] = Tensor::zeros({8, 7});
         w.model.load_state_dict(s);
       }, {"load_state_dict", "0.weight", "[8, 8]", "[8, 7]"}},
      {"Sequential index", [](World& w) { w.model[5]; }, {"Sequential", "index 5"}},
      {"forward(Tensor) of Embedding", [](World&) {
         nn::Embedding e(3, 2);
         static_cast<nn::Module&>(e).forward(Tensor::zeros({1}));
       }, {"Embedding", "forward(Tensor)"}},
      {"init of a vector", [](World& w) { nn::init::xavier_uniform_(w.v); }, {"fans", "[3]"}},
      {"PositionalEncoding past 2^64", [](World&) { nn::PositionalEncoding(std::size_t{1} << 32, std::size_t{1} << 32); },
       {"PositionalEncoding", "[4294967296, 4294967296]", "2^64"}},
      {"Linear past 2^64", [](World&) { nn::Linear(std::size_t{1} << 32, std::size_t{1} << 32); },
       {"Linear", "[4294967296, 4294967296]", "2^64"}},
      {"Embedding past memory", [](World&) { nn::Embedding(std::size_t{1} << 40, 1024); },
       {"Embedding", "[1099511627776, 1024]", "memory this process can have"}},
      {"uniform low > high", [](World&) { Generator g(1); Tensor::uniform({3}, 5.0, 1.0, g); },
       {"Tensor::uniform", "low <= high", "[3]"}},
      {"normal std < 0", [](World&) { Generator g(1); Tensor::normal({2, 3}, 0.0, -1.0, g); },
       {"Tensor::normal", "std >= 0", "-1", "[2, 3]"}},
      {"normal_ with a NaN mean", [](World& w) { nn::init::normal_(w.v, std::nan(""), 1.0); },
       {"Tensor::normal", "finite mean", "nan", "[3]"}},
      // ---- optim ----
      {"negative lr", [](World& w) { optim::SGD(w.model.named_parameters(), {.lr = -0.1}); }, {"SGD", "learning rate", "-0.1"}},
      {"betas", [](World& w) { optim::Adam(w.model.named_parameters(), {.beta2 = 1.5}); }, {"Adam", "beta2 1.5"}},
      {"nesterov", [](World& w) { optim::SGD(w.model.named_parameters(), {.lr = 0.1, .nesterov = true}); }, {"SGD", "nesterov"}},
      {"set_lr NaN", [nan](World& w) { w.adam.set_lr(nan); }, {"Adam", "learning rate", "nan"}},
      {"optimizer state of another model", [](World& w) {
         Tensor x = Tensor::ones({2}).requires_grad_();
         optim::SGD other({{"x", x}}, {.lr = 0.1, .momentum = 0.9});
         sum(x * x).backward();
         other.step();  // now it has state for "x"
         w.adam.load_state_dict(other.state_dict());
       }, {"Adam", "load_state_dict", "unexpected: state.x"}},
      {"clip max_norm", [](World& w) { optim::clip_grad_norm(w.model.parameters(), 0.0); }, {"clip_grad_norm", "max_norm"}},
      {"schedule", [](World& w) { optim::StepLR(w.adam, 0); }, {"StepLR", "step_size 0"}},
      // ---- checkpoints ----
      {"missing file", [](World& w) { nn::load("/nonexistent/x.safetensors", w.model); }, {"/nonexistent/x.safetensors", "cannot open"}},
      {"truncated file", [](World& w) {
         std::ifstream in(w.checkpoint, std::ios::binary);
         const std::string bytes((std::istreambuf_iterator<char>(in)), {});
         const std::string cut = w.checkpoint + ".cut";
         std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
         nn::load(cut, w.model, &w.adam);
       }, {".cut", "bytes"}},
      {"checkpoint of another model", [](World& w) {
         nn::MultiHeadAttention other(4, 2);
         nn::load(w.checkpoint, other);
       }, {"xgrad-bad-input.safetensors", "load_state_dict", "missing"}},
      {"checkpoint dtype", [](World& w) {
         const std::string path = w.checkpoint + ".c64";
         std::ofstream(path, std::ios::binary) << safetensors_bytes(
             R"({"0.bias":{"dtype":"C64","shape":[8],"data_offsets":[0,64]}})", std::string(64, '\0'));
         nn::load(path, w.model);
       }, {".c64", "tensor '0.bias'", "unsupported dtype \"C64\""}},
      {"checkpoint integer past float32", [](World& w) {
         std::vector<std::int32_t> values(8, 1);
         values[3] = (1 << 24) + 1;
         const std::string path = w.checkpoint + ".i32";
         std::ofstream(path, std::ios::binary) << safetensors_bytes(
             R"({"0.bias":{"dtype":"I32","shape":[8],"data_offsets":[0,32]}})",
             std::string(reinterpret_cast<const char*>(values.data()), 32));
         nn::load(path, w.model);
       }, {".i32", "tensor '0.bias'", "I32", "16777217", "element 3", "float32"}},
      {"foreign file", [](World&) {
         const std::string path = (std::filesystem::temp_directory_path() / "xgrad-foreign.txt").string();
         std::ofstream(path) << "these are not the tensors you are looking for";
         nn::Linear l(2, 2);
         nn::load(path, l);
       }, {"xgrad-foreign.txt", "header length"}},
  };
  // clang-format on
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_bad_input_is_a_clear_error_and_changes_nothing) {
  World world;
  const std::vector<Case> table = cases();
  BOOST_TEST_MESSAGE(table.size() << " cases");
  BOOST_CHECK_GE(table.size(), 60u);
  for (const Case& c : table) {
    BOOST_TEST_CONTEXT(c.name) {
      check_error([&] { c.call(world); }, std::initializer_list<std::string>{});
      try {
        c.call(world);
      } catch (const Error& e) {
        const std::string message = e.what();
        for (const std::string& part : c.expect)
          BOOST_CHECK_MESSAGE(message.find(part) != std::string::npos,
                              "\"" << message << "\" lacks \"" << part << "\"");
      } catch (const std::exception& e) {
        BOOST_ERROR("not an xgrad::Error: " << e.what());
      }
      world.check_usable();
    }
  }
}
