#define BOOST_TEST_MODULE models
// The published families (models/): float64 gradchecks of whole models (GPT-2, Llama with
// grouped-query attention, tied and untied heads), the KV cache against the full forward
// (RoPE offsets included), recomputation bitwise, config.json read and written back, and
// bad configs. Parity with PyTorch is model_parity's (tests/model_parity_test.py).
#include "helpers.hpp"
#include "small_models.hpp"

#include <unistd.h>

#include <filesystem>

#include "xgrad/models/models.hpp"

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
              {"cfg", "rope_scaling"});
  check_error([&] { parse("{" + llama + R"(, "num_attention_heads": 2, "hidden_act": "gelu"})"); },
              {"cfg", "hidden_act", "gelu"});
  check_error([&] { parse("{" + llama + R"(, "num_attention_heads": 2, "attention_bias": true})"); },
              {"cfg", "attention_bias"});
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

BOOST_AUTO_TEST_CASE(save_pretrained_refuses_to_replace_a_model) {
  manual_seed(7);
  models::LlamaForCausalLM model(small_llama(2, false));
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("xgrad-test-models-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  models::save_pretrained(model, dir);
  check_error([&] { models::save_pretrained(model, dir); },
              {"already holds", "choose another directory, or overwrite"});
  models::save_pretrained(model, dir, {.max_shard_bytes = 4000, .overwrite = true});  // shards replace the file
  BOOST_CHECK(!std::filesystem::exists(dir + "/model.safetensors"));
  BOOST_CHECK(std::filesystem::exists(dir + "/model.safetensors.index.json"));
  const auto loaded = models::load_pretrained(dir);
  BOOST_CHECK(loaded->forward(kTokens).to_vector() == model.forward(kTokens).to_vector());
  std::filesystem::remove_all(dir);
  // A folder where one of its files goes: refused before any file is written.
  std::filesystem::create_directories(dir + "/config.json");
  check_error([&] { models::save_pretrained(model, dir, {.overwrite = true}); }, {"config.json is a folder"});
  BOOST_CHECK(!std::filesystem::exists(dir + "/model.safetensors"));
  std::filesystem::remove_all(dir);
}
