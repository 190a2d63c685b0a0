#define BOOST_TEST_MODULE models
// The published families (models/): float64 gradchecks of whole models (GPT-2, Llama with
// grouped-query attention, tied and untied heads), the KV cache against the full forward
// (RoPE offsets included), recomputation bitwise, config.json read and written back, and
// bad configs. Parity with PyTorch is model_parity's (tests/model_parity_test.py).
#include "helpers.hpp"
#include "small_models.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numbers>

#include "xgrad/models/models.hpp"
#include "xgrad/nn/checkpoint.hpp"
#include "xgrad/text/tokenizer.hpp"

#include <nlohmann/json.hpp>

using namespace xgrad;
using namespace xgrad::test;

namespace {

const Indices kTokens({1, 4, 2, 9, 0, 3, 7, 5, 8, 6, 2, 1, 0, 4}, {2, 7});
const Indices kTargets({4, 2, 9, 0, 3, 7, 5, 6, 2, 1, 0, 4, 8, 3}, {2, 7});

void check_gradients(models::CausalLM& model) {
  check_module_gradients(
      model, [&](const std::vector<Tensor>&) { return cross_entropy(model.forward(kTokens), kTargets); }, {});
}

// Logits of the whole sequence at once, and of the same tokens fed in pieces through the
// cache: the same numbers (float64: each position's sums run over its keys in order).
void check_cache(models::CausalLM& model) {
  model.to(DType::float64);
  model.eval();
  NoGradGuard no_grad;
  const std::vector<double> whole = model.forward(kTokens).to_vector();
  models::KVCache cache;
  std::vector<double> pieces;
  for (const auto& [begin, end] : std::vector<std::pair<std::size_t, std::size_t>>{{0, 3}, {3, 4}, {4, 7}}) {
    std::vector<std::int64_t> ids;
    for (std::size_t row = 0; row < 2; ++row)
      for (std::size_t t = begin; t < end; ++t) ids.push_back(kTokens.values[row * 7 + t]);
    const std::vector<double> part = model.forward(Indices(ids, {2, end - begin}), &cache).to_vector();
    pieces.insert(pieces.end(), part.begin(), part.end());
  }
  BOOST_CHECK_EQUAL(cache.length, 7u);
  // pieces are [piece][row][t][v]; whole is [row][t][v].
  const std::size_t V = model.vocab_size();
  std::size_t at = 0;
  double worst = 0;
  for (const auto& [begin, end] : std::vector<std::pair<std::size_t, std::size_t>>{{0, 3}, {3, 4}, {4, 7}})
    for (std::size_t row = 0; row < 2; ++row)
      for (std::size_t t = begin; t < end; ++t)
        for (std::size_t v = 0; v < V; ++v)
          worst = std::max(worst, std::abs(pieces[at++] - whole[(row * 7 + t) * V + v]));
  BOOST_CHECK_LT(worst, 1e-12);
}

// With recomputation the gradients are the same bits.
void check_recompute(models::CausalLM& model) {
  const auto grads = [&](bool recompute) {
    model.zero_grad();
    model.set_recompute(recompute);
    cross_entropy(model.forward(kTokens), kTargets).backward();
    std::vector<std::vector<double>> all;
    for (const Tensor& p : model.parameters()) all.push_back(p.grad().to_vector());
    return all;
  };
  const auto plain = grads(false), recomputed = grads(true);
  BOOST_CHECK(plain == recomputed);
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt2_gradients_in_float64) {
  for (const bool tied : {true, false}) {
    manual_seed(1);
    models::GPT2LMHeadModel model(small_gpt2(tied));
    BOOST_CHECK_EQUAL(model.named_parameters().front().first, "transformer.wte.weight");
    BOOST_CHECK_EQUAL(model.lm_head == nullptr, tied);
    check_gradients(model);
  }
}

BOOST_AUTO_TEST_CASE(llama_gradients_in_float64_for_each_grouping) {
  for (const std::size_t kv_heads : {4u, 2u, 1u}) {
    manual_seed(2);
    models::LlamaForCausalLM model(small_llama(kv_heads, kv_heads == 2));
    const StateDict state = model.state_dict();
    BOOST_CHECK(state.at("model.layers.1.self_attn.k_proj.weight").shape() == (Shape{kv_heads * 4, 16}));
    check_gradients(model);
  }
}

BOOST_AUTO_TEST_CASE(the_cache_gives_the_full_forward_logits) {
  manual_seed(3);
  models::GPT2LMHeadModel gpt2(small_gpt2(true));
  check_cache(gpt2);
  for (const std::size_t kv_heads : {4u, 2u}) {
    manual_seed(4);
    models::LlamaForCausalLM llama(small_llama(kv_heads, false));
    check_cache(llama);
  }
}

// A cache is one model's, for one batch of prompts: another model's (more or fewer layers,
// other widths or dtype), another batch, or a length that its tensors do not hold is
// refused naming the cache, before it is changed (it went on to other logits, or dropped
// the layers a smaller model did not have).
BOOST_AUTO_TEST_CASE(a_cache_of_another_model_or_batch_is_refused) {
  NoGradGuard no_grad;
  const Indices three({3, 7, 1}, {1, 3}), next({9}, {1, 1});
  models::LlamaConfig one_layer = small_llama(2, false);
  one_layer.num_hidden_layers = 1;
  models::LlamaForCausalLM one(one_layer), two(small_llama(2, false)), wide(small_llama(4, false));
  models::KVCache of_one, of_two, of_wide;
  one.forward(three, &of_one);
  two.forward(three, &of_two);
  wide.forward(three, &of_wide);
  check_error([&] { two.forward(next, &of_one); }, {"Llama", "KVCache holds 1 layers", "the model has 2"});
  check_error([&] { one.forward(next, &of_two); }, {"Llama", "KVCache holds 2 layers", "the model has 1"});
  BOOST_CHECK_EQUAL(of_two.layers.size(), 2u);
  BOOST_CHECK_EQUAL(of_two.length, 3u);
  check_error([&] { two.forward(next, &of_wide); },
              {"Llama", "layer 0 keys float32 [1, 3, 16] do not fit float32 [1, 3, 8]", "K/V width 8"});
  check_error([&] { two.forward(Indices({9, 9}, {2, 1}), &of_two); }, {"Llama", "tokens of batch 2"});
  models::KVCache edited = of_two;
  edited.length = 1;
  check_error([&] { two.forward(next, &edited); }, {"Llama", "do not fit", "its length 1"});
  models::KVCache stale;
  stale.layers = of_two.layers;
  check_error([&] { two.forward(next, &stale); }, {"Llama", "length is 0 but its layer 0 holds keys"});
  two.to(DType::float64);
  check_error([&] { two.forward(next, &of_two); }, {"Llama", "do not fit float64"});
  // The cache it belongs to goes on: the same logits as the whole sequence.
  two.to(DType::float32);
  const std::vector<double> cached = two.forward(next, &of_two).to_vector();
  const std::vector<double> whole = two.forward(Indices({3, 7, 1, 9}, {1, 4})).to_vector();
  check_close(cached, std::vector<double>(whole.end() - static_cast<std::ptrdiff_t>(cached.size()), whole.end()), 1e-5);
  models::GPT2Config gpt2_config = small_gpt2(true);
  models::GPT2LMHeadModel gpt2(gpt2_config);
  check_error([&] { gpt2.forward(next, &of_two); }, {"GPT2", "do not fit float32 [1, 4, 12]"});
}

BOOST_AUTO_TEST_CASE(recomputation_gives_the_same_gradients) {
  manual_seed(5);
  models::GPT2LMHeadModel gpt2(small_gpt2(false));
  check_recompute(gpt2);
  manual_seed(6);
  models::LlamaForCausalLM llama(small_llama(2, true));
  check_recompute(llama);
}

BOOST_AUTO_TEST_CASE(config_json_reads_back_what_it_wrote) {
  for (const models::ModelConfig& config :
       {models::ModelConfig(small_gpt2(false)), models::ModelConfig(small_llama(2, true))}) {
    const std::string text = models::model_config_json(config);
    const models::ModelConfig read = models::parse_model_config(text, "test");
    BOOST_CHECK_EQUAL(models::model_config_json(read), text);
    BOOST_CHECK_EQUAL(models::model_type(read), models::model_type(config));
  }
  // Hugging Face's defaults for what a file leaves out.
  const auto llama = std::get<models::LlamaConfig>(models::parse_model_config(
      R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
          "num_hidden_layers": 1, "num_attention_heads": 2, "transformers_version": "4.40"})",
      "test"));
  BOOST_CHECK_EQUAL(llama.kv_heads(), 2u);
  BOOST_CHECK_EQUAL(llama.rope_theta, 10000.0);
  BOOST_CHECK(!llama.tie_word_embeddings);
}

BOOST_AUTO_TEST_CASE(bad_configs_are_named) {
  const auto parse = [](const std::string& text) { return models::parse_model_config(text, "cfg"); };
  const std::string llama = R"("model_type": "llama", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
                               "num_hidden_layers": 1)";
  check_error([&] { parse("{" + llama + R"(, "num_attention_heads": 3})"); }, {"cfg", "num_attention_heads", "3"});
  check_error([&] { parse("{" + llama + R"(, "num_attention_heads": 2, "rope_scaling": {"type": "linear"}})"); },
              {"cfg", "rope_scaling.factor", "missing"});
  check_error([&] { parse("{" + llama + R"(, "num_attention_heads": 2, "hidden_act": "gelu"})"); },
              {"cfg", "hidden_act", "gelu"});
  check_error([&] { parse("{" + llama + R"(, "num_attention_heads": 2, "attention_bias": true})"); },
              {"cfg", "attention_bias"});
  // 0 is not "unset" (null is): transformers would build a model of no K/V heads or MLP.
  check_error([&] { parse("{" + llama + R"(, "num_attention_heads": 2, "num_key_value_heads": 0})"); },
              {"cfg", "num_key_value_heads", "positive"});
  check_error(
      [&] {
        parse(R"({"model_type": "gpt2", "vocab_size": 8, "n_positions": 4, "n_embd": 8, "n_layer": 1,
                              "n_head": 2, "n_inner": 0})");
      },
      {"cfg", "n_inner", "positive"});
  check_error(
      [&] {
        parse(R"({"model_type": "gpt2", "vocab_size": 8, "n_positions": 4, "n_embd": 8, "n_layer": 1,
                              "n_head": 2, "activation_function": "swish"})");
      },
      {"cfg", "activation_function", "swish"});
  check_error(
      [&] {
        parse(R"({"model_type": "gpt2", "vocab_size": 8, "n_positions": 4, "n_embd": 0, "n_layer": 1,
                              "n_head": 2})");
      },
      {"cfg", "n_embd", "positive"});
  // An epsilon that float32 rounds to 0, and a model no memory holds (refused before any
  // layer is made: 10^11 layers would otherwise grow until the process is killed).
  check_error(
      [&] {
        parse(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 4, "intermediate_size": 8,
                  "num_hidden_layers": 1, "num_attention_heads": 2, "rms_norm_eps": 1e-60})");
      },
      {"cfg", "rms_norm_eps", "1e-60", "float32"});
  check_error(
      [&] {
        parse(R"({"model_type": "gpt2", "vocab_size": 8, "n_positions": 4, "n_embd": 4, "n_layer": 1,
                  "n_head": 2, "layer_norm_epsilon": 1e-50})");
      },
      {"cfg", "layer_norm_epsilon", "float32"});
  check_error(
      [&] {
        parse(R"({"model_type": "gpt2", "vocab_size": 8, "n_positions": 4, "n_embd": 4, "n_layer": 1,
                  "n_head": 2, "initializer_range": -1})");
      },
      {"cfg", "initializer_range", "-1"});
  check_error(
      [&] {
        parse(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 4, "intermediate_size": 8,
                  "num_hidden_layers": 100000000000, "num_attention_heads": 2})");
      },
      {"cfg", "parameters", "MiB of memory this process can have"});
  check_error([&] { parse("[1, 2]"); }, {"cfg", "JSON object"});
  check_error([&] { parse("{"); }, {"cfg", "not JSON"});
  check_error([&] { models::load_pretrained("/nonexistent-xgrad-dir"); },
              {"/nonexistent-xgrad-dir", "not a directory"});
}

namespace {

// Llama 3.1's frequencies as transformers computes them, masks and all (in double): the
// plain ones, those of long wavelength divided by factor, the middle band blended.
std::vector<double> llama3_frequencies(double theta, std::size_t head_dim, double factor, double low, double high,
                                       double original) {
  std::vector<double> out;
  for (std::size_t i = 0; i < head_dim; i += 2) {
    const double plain = 1.0 / std::pow(theta, static_cast<double>(i) / static_cast<double>(head_dim));
    const double wavelength = 2 * std::numbers::pi / plain;
    const double llama = wavelength > original / low ? plain / factor : plain;
    const double smooth = (original / wavelength - low) / (high - low);
    const bool medium = !(wavelength < original / high) && !(wavelength > original / low);
    out.push_back(medium ? (1 - smooth) * llama / factor + smooth * llama : llama);
  }
  return out;
}

const std::string kLlamaSizes = R"("model_type": "llama", "vocab_size": 8, "hidden_size": 64, "intermediate_size": 8,
                                   "num_hidden_layers": 1, "num_attention_heads": 2)";

models::LlamaConfig parse_llama(const std::string& fields) {
  return std::get<models::LlamaConfig>(models::parse_model_config("{" + kLlamaSizes + ", " + fields + "}", "cfg"));
}

}  // namespace

BOOST_AUTO_TEST_CASE(rope_scaling_as_either_transformers_writes_it) {
  // transformers 4.x: rope_theta beside rope_scaling; 5.x: rope_parameters, theta inside.
  const std::string llama3 = R"("factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 256)";
  const models::LlamaConfig v4 =
      parse_llama(R"("rope_theta": 5000.0, "rope_scaling": {"rope_type": "llama3", )" + llama3 + "}");
  const models::LlamaConfig v5 =
      parse_llama(R"("rope_parameters": {"rope_type": "llama3", "rope_theta": 5000.0, )" + llama3 + "}");
  BOOST_CHECK_EQUAL(v4.rope_scaling.rope_type, "llama3");
  BOOST_CHECK_EQUAL(v4.rope_scaling.original_max_position_embeddings, 256u);
  BOOST_CHECK_EQUAL(models::model_config_json(v4), models::model_config_json(v5));
  // Head width 32: wavelengths from 2 pi to about 2 pi 5000, across all three bands.
  const std::vector<double> expected = llama3_frequencies(5000.0, 32, 8.0, 1.0, 4.0, 256.0);
  check_close(models::scaled_rope_frequencies(v4), expected, 1e-15);
  std::size_t kept = 0, divided = 0, blended = 0;  // by wavelength, against 256 / 4 and 256 / 1
  for (const double f : rope_frequencies(5000.0, 32)) {
    const double wavelength = 2 * std::numbers::pi / f;
    kept += wavelength<64.0, divided += wavelength> 256.0, blended += wavelength >= 64.0 && wavelength <= 256.0;
  }
  BOOST_TEST_MESSAGE("kept " << kept << ", divided " << divided << ", blended " << blended);
  BOOST_CHECK(kept > 0 && divided > 0 && blended > 0);
  // Written back as rope_scaling, and read back the same.
  const models::ModelConfig again = models::parse_model_config(models::model_config_json(v4), "again");
  BOOST_CHECK(std::get<models::LlamaConfig>(again).rope_scaling == v4.rope_scaling);
  BOOST_CHECK_EQUAL(std::get<models::LlamaConfig>(again).rope_theta, 5000.0);

  // Linear: every frequency over factor; files before transformers 4.43 say "type".
  for (const std::string& fields :
       {std::string(R"("rope_theta": 100.0, "rope_scaling": {"type": "linear", "factor": 2.5})"),
        std::string(R"("rope_parameters": {"rope_type": "linear", "factor": 2.5, "rope_theta": 100.0})"),
        std::string(R"("rope_theta": 100, "rope_parameters": {"rope_type": "linear", "factor": 2.5},
                       "rope_scaling": {"rope_type": "linear", "factor": 2.5}, "partial_rotary_factor": 1.0)")}) {
    BOOST_TEST_CONTEXT(fields) {
      const models::LlamaConfig linear = parse_llama(fields);
      std::vector<double> scaled = rope_frequencies(100.0, 32);
      for (double& f : scaled) f /= 2.5;
      check_close(models::scaled_rope_frequencies(linear), scaled, 1e-15);
    }
  }
  // 5.x's plain RoPE: theta from rope_parameters alone (not the default 10000).
  BOOST_CHECK_EQUAL(parse_llama(R"("rope_parameters": {"rope_theta": 1000000.0})").rope_theta, 1e6);
  BOOST_CHECK_EQUAL(parse_llama(R"("rope_parameters": {"rope_type": "default", "rope_theta": 25.0})").rope_theta, 25.0);
  // An empty rope_scaling is plain RoPE; a rope_scaling's own rope_theta is read as 5.x does.
  BOOST_CHECK(parse_llama(R"("rope_scaling": {})").rope_scaling == models::RopeScaling{});
  const models::LlamaConfig inner =
      parse_llama(R"("rope_scaling": {"rope_type": "linear", "factor": 2.0, "rope_theta": 40.0})");
  BOOST_CHECK_EQUAL(inner.rope_theta, 40.0);
  // llama3's original context from the top level, where transformers 5 also reads it.
  const models::LlamaConfig top_original = parse_llama(R"("original_max_position_embeddings": 256,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0})");
  BOOST_CHECK_EQUAL(top_original.rope_scaling.original_max_position_embeddings, 256u);
  const models::LlamaConfig unscaled = parse_llama(R"("rope_scaling": {"rope_type": "default"})");
  BOOST_CHECK(models::scaled_rope_frequencies(unscaled) == rope_frequencies(10000.0, 32));
}

BOOST_AUTO_TEST_CASE(rope_scaling_xgrad_does_not_implement_is_named) {
  const auto refused = [](const std::string& fields, std::initializer_list<std::string> words) {
    check_error([&] { parse_llama(fields); }, words);
  };
  for (const char* type : {"dynamic", "yarn", "longrope", "mrope"}) {
    refused(str(R"("rope_scaling": {"rope_type": ")", type, R"(", "factor": 2.0})"),
            {"cfg", "rope_scaling.rope_type", type, "does not implement"});
    refused(str(R"("rope_parameters": {"rope_type": ")", type, R"(", "factor": 2.0})"),
            {"rope_parameters.rope_type", type, "llama3"});
  }
  refused(R"("rope_scaling": {"factor": 2.0})", {"rope_scaling", "no \"rope_type\""});
  refused(R"("rope_parameters": {"factor": 2.0, "rope_theta": 1e4})", {"rope_parameters", "no \"rope_type\""});
  refused(R"("rope_scaling": "linear")", {"rope_scaling", "must be an object"});
  refused(R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 64})",
          {"rope_scaling.low_freq_factor", "missing"});
  refused(R"("rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 6.5})",
          {"rope_parameters.original_max_position_embeddings", "integer"});
  refused(R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 64})",
          {"high_freq_factor", "above low_freq_factor"});
  refused(R"("rope_scaling": {"rope_type": "linear", "factor": 0})", {"rope_scaling.factor", "at least"});
  // A factor whose reciprocal is no float32 (the first frequency divided by it).
  refused(R"("rope_scaling": {"rope_type": "linear", "factor": 1e-320})", {"rope_scaling.factor", "1e-320", "float32"});
  refused(R"("rope_scaling": {"rope_type": "linear", "factor": 1e-39})", {"rope_scaling.factor", "at least"});
  BOOST_CHECK_NO_THROW(parse_llama(R"("rope_scaling": {"rope_type": "linear", "factor": 1e-38})"));
  refused(R"("rope_scaling": {"rope_type": "linear", "factor": "2"})", {"rope_scaling.factor", "number"});
  // Both generations in one file, saying different things.
  refused(R"("rope_theta": 10000.0, "rope_parameters": {"rope_theta": 500000.0})",
          {"rope_parameters.rope_theta", "500000", "rope_theta", "10000"});
  refused(R"("rope_scaling": {"rope_type": "linear", "factor": 2.0},
              "rope_parameters": {"rope_type": "linear", "factor": 4.0})",
          {"rope_parameters", "rope_scaling", "differently"});
  refused(R"("rope_parameters": {"rope_theta": 1e6}, "rope_scaling": {"rope_type": "linear", "factor": 2.0})",
          {"differently"});
  // RoPE by layer type, or over part of each head: not a Llama's.
  refused(R"("rope_parameters": {"full_attention": {"rope_theta": 1e6}, "sliding_attention": {"rope_theta": 1e4}})",
          {"rope_parameters.full_attention", "layer's type"});
  refused(R"("rope_parameters": {"chunked_attention": {"rope_theta": 1e6}})",
          {"rope_parameters.chunked_attention", "layer's type"});
  refused(R"("partial_rotary_factor": 0.5)", {"partial_rotary_factor", "every column"});
  refused(R"("rope_scaling": {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5})",
          {"rope_scaling.partial_rotary_factor", "every column"});
  // transformers 5 reads rope_scaling as rope_parameters: a theta inside must agree too.
  refused(R"("rope_theta": 100.0, "rope_scaling": {"rope_type": "linear", "factor": 2.0, "rope_theta": 200.0})",
          {"rope_scaling.rope_theta", "200.0", "100.0"});
  refused(R"("original_max_position_embeddings": 128, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
              "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64})",
          {"rope_scaling.original_max_position_embeddings", "64", "128"});
  refused(R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0})",
          {"rope_scaling.original_max_position_embeddings", "missing"});
  refused(R"("rope_parameters": {"rope_theta": 1e6, "partial_rotary_factor": 0.25})",
          {"rope_parameters.partial_rotary_factor", "every column"});
  // A config made in code is checked too.
  models::LlamaConfig c = parse_llama(R"("rope_theta": 10.0)");
  c.rope_scaling.rope_type = "ntk";
  check_error([&] { models::check_config(c, "code"); }, {"code", "\"ntk\"", "does not implement"});
}

BOOST_AUTO_TEST_CASE(a_scaled_llama_learns_and_caches_as_a_plain_one) {
  models::LlamaConfig c = small_llama(2, false);
  c.rope_scaling = {.rope_type = "llama3", .factor = 4.0, .original_max_position_embeddings = 200};
  // Head width 4, theta 500: one frequency kept (wavelength 2 pi), one blended (about 140).
  const std::vector<double> plain = rope_frequencies(500.0, 4), scaled = models::scaled_rope_frequencies(c);
  BOOST_CHECK_EQUAL(scaled[0], plain[0]);
  BOOST_CHECK(scaled[1] < plain[1] && scaled[1] > plain[1] / 4);
  manual_seed(7);
  models::LlamaForCausalLM model(c);
  check_gradients(model);
  check_cache(model);
  // The scaling shows in the logits: the same weights without it give others.
  models::LlamaConfig unscaled = c;
  unscaled.rope_scaling = {};
  models::LlamaForCausalLM plain_model(unscaled);
  plain_model.to(DType::float64);
  plain_model.load_state_dict(model.state_dict());
  plain_model.eval();
  NoGradGuard no_grad;
  BOOST_CHECK(plain_model.forward(kTokens).to_vector() != model.forward(kTokens).to_vector());
}

BOOST_AUTO_TEST_CASE(a_llama_with_a_head_dim_of_its_own) {
  // 4 heads of 6 over a width of 18 (which 4 does not divide): q_proj 24 wide, k and v 12.
  models::LlamaConfig c = small_llama(2, false);
  c.hidden_size = 18, c.head_dim = 6;
  BOOST_CHECK_EQUAL(c.attention_width(), 24u);
  manual_seed(8);
  models::LlamaForCausalLM model(c);
  const StateDict state = model.state_dict();
  BOOST_CHECK(state.at("model.layers.0.self_attn.q_proj.weight").shape() == (Shape{24, 18}));
  BOOST_CHECK(state.at("model.layers.0.self_attn.k_proj.weight").shape() == (Shape{12, 18}));
  BOOST_CHECK(state.at("model.layers.0.self_attn.v_proj.weight").shape() == (Shape{12, 18}));
  BOOST_CHECK(state.at("model.layers.0.self_attn.o_proj.weight").shape() == (Shape{18, 24}));
  check_gradients(model);
  check_cache(model);
  // config.json keeps it; a file without it splits hidden_size.
  const std::string text = models::model_config_json(c);
  BOOST_CHECK_EQUAL(std::get<models::LlamaConfig>(models::parse_model_config(text, "test")).head_dim, 6u);
  BOOST_CHECK_EQUAL(parse_llama(R"("rope_theta": 10.0)").head_width(), 32u);
  BOOST_CHECK_EQUAL(parse_llama(R"("head_dim": 8)").attention_width(), 16u);
  check_error([&] { parse_llama(R"("head_dim": 0)"); }, {"cfg", "head_dim", "positive"});
  check_error([&] { parse_llama(R"("head_dim": 7)"); }, {"cfg", "head_dim = 7", "even"});
  check_error([&] { parse_llama(R"("head_dim": -2)"); }, {"cfg", "head_dim", "non-negative integer"});
  check_error(
      [&] {
        models::parse_model_config(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 18,
            "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 4})",
                                   "cfg");
      },
      {"cfg", "num_attention_heads", "does not divide hidden_size 18", "no head_dim"});
}

BOOST_AUTO_TEST_CASE(mistral_is_llama_with_a_sliding_window) {
  const auto parse_mistral = [](const std::string& fields) {
    return std::get<models::LlamaConfig>(models::parse_model_config(
        R"({"model_type": "mistral", "vocab_size": 8, "hidden_size": 64, "intermediate_size": 8,
            "num_hidden_layers": 1, "num_attention_heads": 16)" +
            fields + "}",
        "cfg"));
  };
  // transformers' MistralConfig defaults: a window of 4096 when the field is absent, none
  // when null; 8 K/V heads when absent, as many as the heads when null; 131072 positions.
  BOOST_CHECK_EQUAL(parse_mistral("").sliding_window, 4096u);
  BOOST_CHECK_EQUAL(parse_mistral("").max_position_embeddings, 131072u);
  BOOST_CHECK_EQUAL(parse_mistral("").kv_heads(), 8u);
  BOOST_CHECK_EQUAL(parse_mistral(R"(, "num_key_value_heads": null)").kv_heads(), 16u);
  BOOST_CHECK_EQUAL(parse_mistral(R"(, "sliding_window": null)").sliding_window, 0u);
  BOOST_CHECK_EQUAL(parse_mistral(R"(, "sliding_window": 3)").sliding_window, 3u);
  check_error([&] { parse_mistral(R"(, "sliding_window": 0)"); }, {"cfg", "sliding_window", "positive"});
  // An absent field's default named as one: 8 K/V heads do not divide 12 heads.
  check_error(
      [] {
        models::parse_model_config(R"({"model_type": "mistral", "vocab_size": 8, "hidden_size": 48,
            "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 12})",
                                   "cfg");
      },
      {"cfg", "num_key_value_heads\" is absent", "8 K/V heads (MistralConfig's)", "num_attention_heads 12"});
  check_error([&] { parse_mistral(R"(, "sliding_window": "4k")"); }, {"cfg", "sliding_window", "integer"});
  // A Llama file's sliding_window is not Llama's (transformers reads none), and a window is
  // Mistral's alone.
  BOOST_CHECK_EQUAL(parse_llama(R"("sliding_window": 3)").sliding_window, 0u);
  models::LlamaConfig c = small_llama(2, false);
  c.sliding_window = 2;
  check_error([&] { models::LlamaForCausalLM refused(c); }, {"sliding window of 2", "\"mistral\""});
  c.model_type = "mistral";
  // config.json as transformers writes Mistral's.
  const std::string text = models::model_config_json(c);
  for (const char* field : {R"("model_type": "mistral")", R"("MistralForCausalLM")", R"("sliding_window": 2)"})
    BOOST_CHECK_MESSAGE(text.find(field) != std::string::npos, field);
  BOOST_CHECK_EQUAL(models::model_config_json(models::parse_model_config(text, "test")), text);
  models::LlamaConfig unwindowed = c;
  unwindowed.sliding_window = 0;
  BOOST_CHECK(models::model_config_json(unwindowed).find(R"("sliding_window": null)") != std::string::npos);

  // A window of 2 over 7 positions and 2 layers: position t reads tokens t - 2 .. t alone.
  manual_seed(9);
  models::LlamaForCausalLM model(c);
  check_gradients(model);
  check_cache(model);  // pieces of 3, 1 and 3 positions: the window over cached keys
  model.eval();
  NoGradGuard no_grad;
  const std::vector<double> logits = model.forward(kTokens).to_vector();
  std::vector<std::int64_t> changed = kTokens.values;
  changed[0] = (changed[0] + 1) % 13, changed[7] = (changed[7] + 5) % 13;  // position 0 of each row
  const std::vector<double> moved = model.forward(Indices(changed, kTokens.shape)).to_vector();
  const std::size_t V = 13;
  for (std::size_t row = 0; row < 2; ++row)
    for (std::size_t t = 0; t < 7; ++t) {
      const auto at = logits.begin() + static_cast<std::ptrdiff_t>((row * 7 + t) * V);
      const auto moved_at = moved.begin() + static_cast<std::ptrdiff_t>((row * 7 + t) * V);
      BOOST_CHECK_MESSAGE(std::equal(at, at + V, moved_at) == (t >= 3), "row " << row << ", position " << t);
    }
  // Without the window the same weights give other logits; with one as long as the
  // sequence, Llama's.
  c.sliding_window = 7;
  models::LlamaForCausalLM plain(small_llama(2, false)), seven(c);
  for (models::LlamaForCausalLM* other : {&plain, &seven}) {
    other->to(DType::float64);
    other->load_state_dict(model.state_dict());
    other->eval();
  }
  BOOST_CHECK(plain.forward(kTokens).to_vector() != logits);
  const std::vector<double> plain_logits = plain.forward(kTokens).to_vector(),
                            seven_logits = seven.forward(kTokens).to_vector();
  double worst = 0;
  for (std::size_t i = 0; i < plain_logits.size(); ++i)
    worst = std::max(worst, std::abs(plain_logits[i] - seven_logits[i]));
  BOOST_CHECK_LT(worst, 1e-12);
}

// transformers' generate() stops at eos_token_id, and defaults it per family when the
// file gives none (50256 for GPT-2, 2 for Llama: tokens of another vocabulary). The ids a
// config gives are written back as they were; the ones it does not come from the
// tokenizer's special tokens, or are null.
BOOST_AUTO_TEST_CASE(token_ids_are_kept_or_named_never_left_to_defaults) {
  const auto written = [](const models::ModelConfig& config, const models::ConfigJsonOptions& options = {}) {
    return nlohmann::json::parse(models::model_config_json(config, options));
  };
  const models::ModelConfig read = models::parse_model_config(
      R"({"model_type": "llama", "vocab_size": 300, "hidden_size": 8, "intermediate_size": 8,
          "num_hidden_layers": 1, "num_attention_heads": 2, "bos_token_id": 298,
          "eos_token_id": [299, 297], "pad_token_id": null})",
      "test");
  const nlohmann::json kept = written(read);
  BOOST_CHECK(kept["bos_token_id"] == 298 && kept["eos_token_id"] == nlohmann::json({299, 297}));
  BOOST_CHECK(kept.contains("pad_token_id") && kept["pad_token_id"].is_null());
  BOOST_CHECK_EQUAL(models::model_config_json(models::parse_model_config(kept.dump(), "again")),
                    models::model_config_json(read));
  // None given: the tokenizer's, or null.
  std::vector<std::string> ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace_back(1, static_cast<char>(b));
  const text::Tokenizer gpt2_like(ranks, {{"<|endoftext|>", 256}}), llama_like(ranks, {{"<s>", 256}, {"</s>", 257}}),
      none(ranks);
  const models::ModelConfig bare = small_gpt2(true);
  BOOST_CHECK(written(bare, {.tokenizer = &gpt2_like})["bos_token_id"] == 256);
  BOOST_CHECK(written(bare, {.tokenizer = &gpt2_like})["eos_token_id"] == 256);
  BOOST_CHECK(written(bare, {.tokenizer = &llama_like})["bos_token_id"] == 256);
  BOOST_CHECK(written(bare, {.tokenizer = &llama_like})["eos_token_id"] == 257);
  for (const nlohmann::json& out : {written(bare), written(bare, {.tokenizer = &none})})
    BOOST_CHECK(out.contains("eos_token_id") && out["eos_token_id"].is_null() && out["bos_token_id"].is_null() &&
                !out.contains("pad_token_id"));
  BOOST_CHECK(written(bare)["torch_dtype"] == "float32");
  // Refused: an id that is no id.
  check_error(
      [] {
        models::parse_model_config(R"({"model_type": "gpt2", "vocab_size": 8, "n_positions": 4,
      "n_embd": 4, "n_layer": 1, "n_head": 1, "eos_token_id": "</s>"})",
                                   "bad");
      },
      {"bad", "field \"eos_token_id\" must be a token id"});
}

// A folder says what its tensors are (torch_dtype), and never holds a tokenizer its model
// cannot embed.
BOOST_AUTO_TEST_CASE(save_pretrained_writes_its_dtype_and_refuses_a_larger_tokenizer) {
  const std::string dir = fresh_folder("models", "dtype").string();
  manual_seed(9);
  models::LlamaForCausalLM model(small_llama(2, false));
  model.to(DType::float64);
  models::save_pretrained(model, dir);
  BOOST_CHECK(nlohmann::json::parse(file_bytes(dir + "/config.json"))["torch_dtype"] == "float64");
  std::vector<std::string> ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace_back(1, static_cast<char>(b));
  const text::Tokenizer larger(ranks);  // 256 ids, the model 13
  check_error([&] { models::save_pretrained(model, dir + "-tok", {.tokenizer = &larger}); },
              {"save_pretrained", "the tokenizer has 256 ids, more than the model's vocabulary of 13"});
  BOOST_CHECK(!std::filesystem::exists(dir + "-tok"));
  std::filesystem::remove_all(dir);
}

// A model of a text's bytes has no tokenizer: config.json lists the byte each id stands
// for (xgrad_text_bytes), kept through reading and writing; a list that is no set of
// bytes in order, or longer than the vocabulary, is refused, and such a model takes no
// tokenizer, in a folder or a GGUF file.
BOOST_AUTO_TEST_CASE(a_model_of_a_texts_bytes_lists_them_in_its_config) {
  const auto parsed = [](const std::string& list) {
    return models::parse_model_config(R"({"model_type": "gpt2", "vocab_size": 4, "n_positions": 4, "n_embd": 4,
                                          "n_layer": 1, "n_head": 1, "xgrad_text_bytes": )" +
                                          list + "}",
                                      "bytes");
  };
  const models::ModelConfig read = parsed("[10, 32, 97]");
  BOOST_CHECK((std::get<models::GPT2Config>(read).token_ids.text_bytes == std::vector<std::uint8_t>{10, 32, 97}));
  BOOST_CHECK(nlohmann::json::parse(models::model_config_json(read))["xgrad_text_bytes"] ==
              nlohmann::json({10, 32, 97}));
  BOOST_CHECK(std::get<models::GPT2Config>(parsed("null")).token_ids.text_bytes.empty());
  for (const char* bad : {"[]", "[32, 10]", "[10, 10]", "[256]", "[-1]", "[1.5]", "\"ab\"", "[\"a\"]"})
    check_error([&] { parsed(bad); }, {"bytes", "field \"xgrad_text_bytes\" must be a list of bytes"});
  check_error([&] { parsed("[1, 2, 3, 4, 5]"); },
              {"bytes", "field \"xgrad_text_bytes\" holds 5 bytes, more than vocab_size 4"});
  // Given when saving (a model of a text trained from flags), or kept from the config.
  const std::vector<std::uint8_t> bytes = {10, 32, 97, 98};
  const std::vector<std::uint8_t> other = {10, 32, 97, 99};
  const models::ModelConfig bare = small_gpt2(true);
  BOOST_CHECK(nlohmann::json::parse(models::model_config_json(bare, {.text_bytes = &bytes}))["xgrad_text_bytes"] ==
              nlohmann::json(bytes));
  BOOST_CHECK(!nlohmann::json::parse(models::model_config_json(bare)).contains("xgrad_text_bytes"));
  const std::string dir = fresh_folder("models", "bytes").string();
  manual_seed(11);
  models::GPT2Config wide = std::get<models::GPT2Config>(bare);
  wide.vocab_size = 256;  // room for a tokenizer of the 256 bytes: refused as no model of them
  models::GPT2LMHeadModel model(wide);
  models::save_pretrained(model, dir, {.text_bytes = &bytes});
  const auto loaded = models::load_pretrained(dir);
  BOOST_CHECK(std::get<models::GPT2Config>(loaded->config()).token_ids.text_bytes == bytes);
  models::save_pretrained(*loaded, dir, {.overwrite = true});  // kept without being given
  BOOST_CHECK(nlohmann::json::parse(file_bytes(dir + "/config.json"))["xgrad_text_bytes"] == nlohmann::json(bytes));
  check_error([&] { models::save_pretrained(*loaded, dir, {.overwrite = true, .text_bytes = &other}); },
              {"save_pretrained", "the text bytes given are not those the model's config holds"});
  std::vector<std::string> ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace_back(1, static_cast<char>(b));
  const text::Tokenizer tokenizer(ranks);
  check_error([&] { models::save_pretrained(*loaded, dir + "-tok", {.tokenizer = &tokenizer}); },
              {"save_pretrained", "a model of a text's bytes", "cannot be given a tokenizer"});
  check_error([&] { models::save_gguf(*loaded, tokenizer, dir + ".gguf"); },
              {"a model of a text's bytes", "takes no tokenizer's ids"});
  BOOST_CHECK(!std::filesystem::exists(dir + "-tok") && !std::filesystem::exists(dir + ".gguf"));
  std::filesystem::remove_all(dir);
}

// A tied model whose file holds the shared matrix as lm_head.weight alone, as
// safetensors' save_model writes it (the first of the shared names): that is the
// embedding. Tied GPT-2 and Llama give the logits of the model saved.
BOOST_AUTO_TEST_CASE(a_tied_model_stored_as_its_head_alone_loads) {
  const std::string dir = fresh_folder("models", "tied").string();
  manual_seed(10);
  const std::vector<std::pair<std::unique_ptr<models::PretrainedModel>, std::string>> models_and_embeddings = [] {
    std::vector<std::pair<std::unique_ptr<models::PretrainedModel>, std::string>> made;
    made.emplace_back(models::make_model(small_gpt2(true)), "transformer.wte.weight");
    made.emplace_back(models::make_model(small_llama(2, true)), "model.embed_tokens.weight");
    return made;
  }();
  for (const auto& [model, embedding] : models_and_embeddings) {
    std::filesystem::remove_all(dir);
    models::save_pretrained(*model, dir);
    nn::SafetensorsContents contents = nn::read_safetensors(dir + "/model.safetensors");
    contents.tensors["lm_head.weight"] = contents.tensors.at(embedding);
    contents.tensors.erase(embedding);
    nn::write_safetensors(dir + "/model.safetensors", contents.tensors, contents.metadata);
    BOOST_CHECK(models::load_pretrained(dir)->forward(kTokens).to_vector() == model->forward(kTokens).to_vector());
    // A head of another shape is no embedding: named as such.
    contents.tensors["lm_head.weight"] = Tensor::zeros({3, 3});
    nn::write_safetensors(dir + "/model.safetensors", contents.tensors, contents.metadata);
    check_error([&] { models::load_pretrained(dir); },
                {embedding + " (as lm_head.weight, the head tied to it) is [3, 3]"});
    // Both, the same values (an older save): loads. Both, differing (or NaN in the head,
    // or another shape): one of them would be dropped, so refused.
    contents.tensors[embedding] = contents.tensors["lm_head.weight"] = model->hf_state_dict().at(embedding);
    nn::write_safetensors(dir + "/model.safetensors", contents.tensors, contents.metadata);
    BOOST_CHECK(models::load_pretrained(dir)->forward(kTokens).to_vector() == model->forward(kTokens).to_vector());
    {  // the same NaN in both places: one matrix (taken as it is, as NaN always is)
      std::vector<double> values = contents.tensors[embedding].to_vector();
      values[3] = std::nan("");
      contents.tensors[embedding] = contents.tensors["lm_head.weight"] =
          Tensor::from_vector(values, contents.tensors[embedding].shape());
      nn::write_safetensors(dir + "/model.safetensors", contents.tensors, contents.metadata);
      BOOST_CHECK_NO_THROW(models::load_pretrained(dir));
      contents.tensors[embedding] = contents.tensors["lm_head.weight"] = model->hf_state_dict().at(embedding);
    }
    for (const Tensor& head : {contents.tensors[embedding] * Tensor::scalar(2.0f),
                               contents.tensors[embedding] * Tensor::scalar(std::nanf("")), Tensor::zeros({3, 3})}) {
      contents.tensors["lm_head.weight"] = head;
      nn::write_safetensors(dir + "/model.safetensors", contents.tensors, contents.metadata);
      check_error([&] { models::load_pretrained(dir); },
                  {"holds lm_head.weight", "beside " + embedding, "but they differ", "tie_word_embeddings"});
    }
  }
  std::filesystem::remove_all(dir);
}

// A finite float64 value a float32 model cannot hold is refused, naming the tensor; the
// same file loads into float64.
BOOST_AUTO_TEST_CASE(a_float64_value_past_float32_is_refused_for_float32) {
  const std::string dir = fresh_folder("models", "f64").string();
  manual_seed(12);
  models::GPT2LMHeadModel model(small_gpt2(false));
  model.to(DType::float64);
  models::save_pretrained(model, dir);
  nn::SafetensorsContents contents = nn::read_safetensors(dir + "/model.safetensors");
  Tensor& bias = contents.tensors.at("transformer.h.0.ln_1.bias");
  std::vector<double> values = bias.to_vector();
  values[1] = 1e300;
  bias = Tensor::from_vector(values, bias.shape(), DType::float64);
  nn::write_safetensors(dir + "/model.safetensors", contents.tensors, contents.metadata);
  check_error([&] { models::load_pretrained(dir); }, {"transformer.h.0.ln_1.bias", "1e+300", "past float32's range"});
  BOOST_CHECK_NO_THROW(models::load_pretrained(dir, DType::float64));
  std::filesystem::remove_all(dir);
}

// Replacing a model removes its own files only: not a file that merely starts with
// "model" (an EMA copy) nor a folder of a shard's name.
BOOST_AUTO_TEST_CASE(an_overwrite_removes_the_old_model_files_alone) {
  const std::string dir = fresh_folder("models", "keep").string();
  manual_seed(13);
  models::LlamaForCausalLM model(small_llama(2, false));
  models::save_pretrained(model, dir, {.max_shard_bytes = 4000});
  BOOST_REQUIRE(std::filesystem::exists(dir + "/model-00001-of-00002.safetensors") ||
                std::filesystem::exists(dir + "/model.safetensors.index.json"));
  for (const char* kept : {"model_ema.safetensors", "modelcard.safetensors"})
    std::ofstream(dir + "/" + kept) << "the user's";
  std::filesystem::create_directories(dir + "/model-00009-of-00009.safetensors/inside");
  models::save_pretrained(model, dir, {.overwrite = true});
  BOOST_CHECK(std::filesystem::exists(dir + "/model.safetensors"));
  BOOST_CHECK(!std::filesystem::exists(dir + "/model.safetensors.index.json"));
  BOOST_CHECK(!std::filesystem::exists(dir + "/model-00001-of-00002.safetensors"));
  BOOST_CHECK(std::filesystem::exists(dir + "/model_ema.safetensors"));
  BOOST_CHECK(std::filesystem::exists(dir + "/modelcard.safetensors"));
  BOOST_CHECK(std::filesystem::exists(dir + "/model-00009-of-00009.safetensors/inside"));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(save_pretrained_refuses_to_replace_a_model) {
  manual_seed(7);
  models::LlamaForCausalLM model(small_llama(2, false));
  const std::string dir = fresh_folder("models", "models").string();
  models::save_pretrained(model, dir);
  check_error([&] { models::save_pretrained(model, dir); },
              {"already holds", "choose another directory, or overwrite"});
  models::save_pretrained(model, dir, {.max_shard_bytes = 4000, .overwrite = true});  // shards replace the file
  BOOST_CHECK(!std::filesystem::exists(dir + "/model.safetensors"));
  BOOST_CHECK(std::filesystem::exists(dir + "/model.safetensors.index.json"));
  const auto loaded = models::load_pretrained(dir);
  BOOST_CHECK(loaded->forward(kTokens).to_vector() == model.forward(kTokens).to_vector());
  // Both the one file and shards (written by hand): the one file, as transformers reads it.
  manual_seed(8);
  models::LlamaForCausalLM other(small_llama(2, false));
  models::save_pretrained(other, dir + "-one");
  std::filesystem::copy_file(dir + "-one/model.safetensors", dir + "/model.safetensors");
  BOOST_CHECK(models::load_pretrained(dir)->forward(kTokens).to_vector() == other.forward(kTokens).to_vector());
  std::filesystem::remove_all(dir + "-one");
  std::filesystem::remove_all(dir);
  // A folder where one of its files goes: refused before any file is written.
  std::filesystem::create_directories(dir + "/config.json");
  check_error([&] { models::save_pretrained(model, dir, {.overwrite = true}); }, {"config.json is a folder"});
  BOOST_CHECK(!std::filesystem::exists(dir + "/model.safetensors"));
  std::filesystem::remove_all(dir);
}
