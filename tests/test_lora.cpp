#define BOOST_TEST_MODULE lora
#include "helpers.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "xgrad/nn/nn.hpp"
#include "xgrad/optim/optim.hpp"

using namespace xgrad;
using namespace xgrad::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// GPT-2's layout in miniature, under the names PEFT sees in GPT-2: h.<i>.attn.c_attn,
// h.<i>.attn.c_proj, h.<i>.mlp.c_fc, h.<i>.mlp.c_proj, and an untargeted lm_head.
class Attention : public nn::Module {
 public:
  explicit Attention(std::size_t d)
      : c_attn(register_module("c_attn", std::make_shared<nn::Linear>(d, 2 * d))),
        c_proj(register_module("c_proj", std::make_shared<nn::Linear>(2 * d, d))) {}
  Tensor forward(const Tensor& x) override { return c_proj->forward(tanh(c_attn->forward(x))); }
  std::shared_ptr<nn::Linear> c_attn, c_proj;
};

class MLP : public nn::Module {
 public:
  explicit MLP(std::size_t d)
      : c_fc(register_module("c_fc", std::make_shared<nn::Linear>(d, 3 * d))),
        c_proj(register_module("c_proj", std::make_shared<nn::Linear>(3 * d, d))) {}
  Tensor forward(const Tensor& x) override { return c_proj->forward(tanh(c_fc->forward(x))); }
  std::shared_ptr<nn::Linear> c_fc, c_proj;
};

class Block : public nn::Module {
 public:
  explicit Block(std::size_t d)
      : ln_1(register_module("ln_1", std::make_shared<nn::LayerNorm>(d))),
        attn(register_module("attn", std::make_shared<Attention>(d))),
        mlp(register_module("mlp", std::make_shared<MLP>(d))) {}
  Tensor forward(const Tensor& x) override {
    const Tensor h = x + attn->forward(ln_1->forward(x));
    return h + mlp->forward(h);
  }
  std::shared_ptr<nn::LayerNorm> ln_1;
  std::shared_ptr<Attention> attn;
  std::shared_ptr<MLP> mlp;
};

class Toy : public nn::Module {
 public:
  explicit Toy(std::uint64_t seed, std::size_t d = 4) {
    manual_seed(seed);
    h = register_module("h", std::make_shared<nn::Sequential>());
    h->push_back(std::make_shared<Block>(d));
    h->push_back(std::make_shared<Block>(d));
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(d, 5, /*bias=*/false));
  }
  Tensor forward(const Tensor& x) override { return lm_head->forward(h->forward(x)); }
  std::shared_ptr<nn::Sequential> h;
  std::shared_ptr<nn::Linear> lm_head;
};

bool is_adapter(const std::string& name) { return name.ends_with("lora_A.weight") || name.ends_with("lora_B.weight"); }

std::vector<std::string> names_of(const nn::NamedTensors& named) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : named) names.push_back(name);
  return names;
}

// B starts at zeros, which would make merging and gradients through A trivial.
void randomize_adapters(nn::Module& model, std::uint64_t seed) {
  NoGradGuard no_grad;
  Generator gen(seed);
  for (auto& [name, p] : model.named_parameters())
    if (is_adapter(name)) p.set_data(Tensor::randn(p.shape(), gen, p.dtype()) * 0.5);
}

std::map<std::string, std::vector<double>> values_of(const nn::Module& model) {
  std::map<std::string, std::vector<double>> values;
  for (const auto& [name, p] : model.named_parameters()) values[name] = p.to_vector();
  return values;
}

nn::LoRAConfig gpt2_config() {
  return {.r = 2,
          .lora_alpha = 16,
          .target_modules = {"c_attn", "c_proj"},
          .fan_in_fan_out = true,
          .base_model_name_or_path = "gpt2"};
}

const std::vector<std::string> kGpt2Targets = {"h.0.attn.c_attn", "h.0.attn.c_proj", "h.0.mlp.c_proj",
                                               "h.1.attn.c_attn", "h.1.attn.c_proj", "h.1.mlp.c_proj"};

Tensor input(std::uint64_t seed, DType dtype = DType::float32) {
  Generator gen(seed);
  return Tensor::randn({3, 4}, gen, dtype);
}

void write_json(const fs::path& path, const json& fields) { put_file(path, fields.dump(2)); }

}  // namespace

BOOST_AUTO_TEST_SUITE(adapter)

BOOST_AUTO_TEST_CASE(a_new_adapter_adds_nothing_and_has_peft_names_and_init) {
  manual_seed(3);
  nn::Linear linear(50, 3);
  const Tensor x50 = Tensor::randn({2, 50}, default_generator());
  const std::vector<double> before = linear.forward(x50).to_vector();
  linear.add_lora({.rank = 4, .alpha = 8});
  BOOST_TEST(names_of(linear.named_parameters()) ==
                 (std::vector<std::string>{"weight", "bias", "lora_A.weight", "lora_B.weight"}),
             boost::test_tools::per_element());
  BOOST_TEST(linear.lora_A->weight.shape() == (Shape{4, 50}), boost::test_tools::per_element());
  BOOST_TEST(linear.lora_B->weight.shape() == (Shape{3, 4}), boost::test_tools::per_element());
  BOOST_TEST(linear.forward(x50).to_vector() == before, boost::test_tools::per_element());
  const double bound = 1.0 / std::sqrt(50.0);
  const std::vector<double> a = linear.lora_A->weight.to_vector();
  BOOST_TEST(*std::max_element(a.begin(), a.end()) <= bound);
  BOOST_TEST(*std::min_element(a.begin(), a.end()) >= -bound);
  BOOST_TEST(*std::max_element(a.begin(), a.end()) > bound / 2);  // drawn, not zeros
  for (double b : linear.lora_B->weight.to_vector()) BOOST_TEST(b == 0.0);
  BOOST_TEST(!linear.weight.requires_grad());
  BOOST_TEST(!linear.bias.requires_grad());
  BOOST_TEST(linear.lora_A->weight.requires_grad());
  BOOST_TEST(linear.lora_scaling() == 2.0);
  linear.merge_lora();
  linear.add_lora({.rank = 4, .alpha = 8, .rslora = true});
  BOOST_TEST(linear.lora_scaling() == 4.0);
}

BOOST_AUTO_TEST_CASE(gradcheck_of_an_adapted_linear) {
  for (const bool rslora : {false, true}) {
    manual_seed(5);
    nn::Linear linear(5, 3);
    linear.to(DType::float64);
    linear.add_lora({.rank = 2, .alpha = 3, .rslora = rslora});
    randomize_adapters(linear, 7);
    const auto forward = [&](const std::vector<Tensor>& in) { return linear.forward(in[0]); };
    // The adapters and the input (the base is frozen)...
    check_module_gradients(linear, forward, {randn64({2, 4, 5}, 11)});
    // ...and everything, the base unfrozen.
    linear.weight.requires_grad_(true);
    linear.bias.requires_grad_(true);
    check_module_gradients(linear, forward, {randn64({2, 5}, 12)});
  }
}

BOOST_AUTO_TEST_CASE(dropout_applies_to_the_adapter_input_in_training_only) {
  manual_seed(8);
  nn::Linear linear(6, 4);
  linear.to(DType::float64);
  linear.add_lora({.rank = 2, .alpha = 2, .dropout = 0.5});
  randomize_adapters(linear, 9);
  const Tensor x = randn64({3, 6}, 10, false);
  const std::vector<double> base = xgrad::linear(x, linear.weight, linear.bias).to_vector();
  linear.eval();
  const std::vector<double> no_dropout = linear.forward(x).to_vector();
  linear.train();
  const std::vector<double> with_dropout = linear.forward(x).to_vector();
  BOOST_TEST((no_dropout != with_dropout));
  // Dropout never touches the base path: zeroing the adapter leaves the base output.
  {
    NoGradGuard no_grad;
    nn::init::zeros_(linear.lora_B->weight);
  }
  check_close(linear.forward(x).to_vector(), base, 0.0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(model)

BOOST_AUTO_TEST_CASE(targets_follow_peft_suffix_and_regex_rules) {
  Toy toy(1);
  const std::vector<std::string> paths = nn::apply_lora(toy, gpt2_config());
  BOOST_TEST(paths == kGpt2Targets, boost::test_tools::per_element());
  std::vector<std::string> adapter_names;
  for (const std::string& name : names_of(toy.named_parameters()))
    if (is_adapter(name)) adapter_names.push_back(name);
  BOOST_TEST(adapter_names.size() == 12u);
  BOOST_TEST(adapter_names[0] == "h.0.attn.c_attn.lora_A.weight");
  BOOST_TEST(adapter_names[1] == "h.0.attn.c_attn.lora_B.weight");
  // A full path, and a regex over the whole path.
  Toy other(1);
  BOOST_TEST(nn::apply_lora(other, {.target_modules = {"h.1.mlp.c_fc"}}) == std::vector<std::string>{"h.1.mlp.c_fc"},
             boost::test_tools::per_element());
  Toy third(1);
  BOOST_TEST(nn::apply_lora(third, {.target_regex = R"(h\.0\..*c_proj)"}) ==
                 (std::vector<std::string>{"h.0.attn.c_proj", "h.0.mlp.c_proj"}),
             boost::test_tools::per_element());
  // A suffix must be whole components: "proj" is no target of "c_proj".
  Toy fourth(1);
  check_error([&] { nn::apply_lora(fourth, {.target_modules = {"proj"}}); }, {"apply_lora", "'proj'"});
}

BOOST_AUTO_TEST_CASE(the_base_gets_no_gradient_and_the_optimizer_state_is_the_adapters_alone) {
  Toy toy(2);
  nn::apply_lora(toy, gpt2_config());
  const nn::NamedTensors trainable = nn::trainable_parameters(toy);
  BOOST_TEST(trainable.size() == 12u);
  for (const auto& [name, p] : trainable) BOOST_TEST(is_adapter(name), name);
  // Built on every parameter or on the trainable ones, Adam and AdamW hold state for
  // the adapters alone.
  optim::AdamW adamw(trainable, {.lr = 1e-2});
  optim::Adam adam(toy.named_parameters(), {.lr = 1e-2});
  for (optim::Optimizer* opt : std::vector<optim::Optimizer*>{&adamw, &adam}) {
    opt->zero_grad();
    sum(toy.forward(input(3)) * toy.forward(input(4))).backward();
    for (const auto& [name, p] : toy.named_parameters()) BOOST_TEST(p.grad().defined() == is_adapter(name), name);
    opt->step();
    std::set<std::string> with_state;
    std::size_t state_tensors = 0, state_elements = 0;
    for (const auto& [key, tensor] : opt->state_dict()) {
      if (!key.starts_with("state.")) continue;
      ++state_tensors;
      state_elements += tensor.numel();
      const std::string rest = key.substr(6);
      with_state.insert(rest.substr(0, rest.rfind('.')));
    }
    BOOST_TEST(with_state.size() == 12u);
    for (const std::string& name : with_state) BOOST_TEST(is_adapter(name), name);
    BOOST_TEST(state_tensors == 12u * 3);  // step, exp_avg, exp_avg_sq
    std::size_t adapter_elements = 0;
    for (const auto& [name, p] : trainable) adapter_elements += p.numel();
    BOOST_TEST(state_elements == 2 * adapter_elements + 12);
  }
}

BOOST_AUTO_TEST_CASE(training_changes_only_the_adapters) {
  Toy toy(3);
  const auto before = values_of(toy);
  nn::LoRAConfig config = gpt2_config();
  config.lora_dropout = 0.25;
  nn::apply_lora(toy, config);
  const auto adapters_before = values_of(toy);
  optim::AdamW adamw(nn::trainable_parameters(toy), {.lr = 1e-2});
  for (int step = 0; step < 3; ++step) {
    adamw.zero_grad();
    mean(toy.forward(input(20 + step)) * toy.forward(input(30 + step))).backward();
    adamw.step();
  }
  for (const auto& [name, values] : values_of(toy)) {
    if (is_adapter(name))
      BOOST_TEST((values != adapters_before.at(name)), name);
    else
      BOOST_TEST((values == before.at(name)), name);  // bitwise
  }
}

BOOST_AUTO_TEST_CASE(merging_equals_the_adapted_model) {
  Toy toy(4);
  toy.to(DType::float64);
  const Tensor x = input(5, DType::float64);
  const std::vector<double> base = toy.forward(x).to_vector();
  nn::LoRAConfig config = gpt2_config();
  config.use_rslora = true;
  nn::apply_lora(toy, config);
  randomize_adapters(toy, 6);
  const std::vector<double> adapted = toy.forward(x).to_vector();
  BOOST_TEST((adapted != base));
  BOOST_TEST(nn::merge_lora(toy) == kGpt2Targets, boost::test_tools::per_element());
  for (const std::string& name : names_of(toy.named_parameters())) BOOST_TEST(name.find("lora_") == std::string::npos);
  for (const auto& [name, p] : toy.named_parameters()) BOOST_TEST(!p.requires_grad(), name);  // still frozen
  check_close(toy.forward(x).to_vector(), adapted, 1e-12);
  BOOST_TEST(nn::merge_lora(toy).empty());
}

BOOST_AUTO_TEST_CASE(merging_a_transformer_layer_with_its_fused_relu) {
  manual_seed(7);
  nn::TransformerEncoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 12, .dropout = 0.0});
  layer.to(DType::float64);
  layer.eval();
  Generator gen(8);
  const Tensor x = Tensor::randn({2, 3, 8}, gen, DType::float64);
  const std::vector<double> base = layer.forward(x).to_vector();
  const auto paths =
      nn::apply_lora(layer, {.r = 3, .lora_alpha = 5, .target_modules = {"linear1", "linear2", "out_proj"}});
  BOOST_TEST(paths == (std::vector<std::string>{"self_attn.out_proj", "linear1", "linear2"}),
             boost::test_tools::per_element());
  randomize_adapters(layer, 9);
  const std::vector<double> adapted = layer.forward(x).to_vector();
  // Each adapter is used: linear1's too, though relu is fused into it without one.
  for (const std::string& path : paths) {
    nn::Linear& linear = path == "linear1"   ? *layer.linear1
                         : path == "linear2" ? *layer.linear2
                                             : *layer.self_attn->out_proj;
    const Tensor saved = linear.lora_B->weight.clone();
    {
      NoGradGuard no_grad;
      nn::init::zeros_(linear.lora_B->weight);
    }
    BOOST_TEST((layer.forward(x).to_vector() != adapted), path);
    NoGradGuard no_grad;
    linear.lora_B->weight.set_data(saved);
  }
  BOOST_TEST((adapted != base));
  nn::merge_lora(layer);
  check_close(layer.forward(x).to_vector(), adapted, 1e-12);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(peft_files)

BOOST_AUTO_TEST_CASE(save_and_load_round_trip_bitwise_under_peft_names) {
  const fs::path dir = fresh_folder("lora", "round_trip") / "adapter";  // made by save_adapter
  Toy toy(10);
  const nn::LoRAConfig config = gpt2_config();
  nn::apply_lora(toy, config);
  randomize_adapters(toy, 11);
  nn::save_adapter(dir.string(), toy, config);

  const nn::SafetensorsContents file = nn::read_safetensors((dir / "adapter_model.safetensors").string());
  std::set<std::string> keys;
  for (const auto& [key, tensor] : file.tensors) keys.insert(key);
  std::set<std::string> expected;
  for (const std::string& path : kGpt2Targets) {
    expected.insert("base_model.model." + path + ".lora_A.weight");
    expected.insert("base_model.model." + path + ".lora_B.weight");
  }
  BOOST_TEST(keys == expected, boost::test_tools::per_element());
  for (const auto& [key, dtype] : file.dtypes) BOOST_TEST(dtype == "F32", key);
  BOOST_TEST(file.metadata.at("format") == "pt");
  BOOST_TEST(file.tensors.at("base_model.model.h.0.attn.c_attn.lora_A.weight").shape() == (Shape{2, 4}),
             boost::test_tools::per_element());
  BOOST_TEST(file.tensors.at("base_model.model.h.0.attn.c_attn.lora_B.weight").shape() == (Shape{8, 2}),
             boost::test_tools::per_element());

  const json fields = json::parse(file_bytes(dir / "adapter_config.json"));
  BOOST_TEST(fields.at("peft_type") == "LORA");
  BOOST_TEST(fields.at("task_type") == "CAUSAL_LM");
  BOOST_TEST(fields.at("r") == 2);
  BOOST_TEST(fields.at("lora_alpha").is_number_integer());
  BOOST_TEST(fields.at("lora_alpha") == 16);
  BOOST_TEST(fields.at("lora_dropout") == 0.0);
  BOOST_TEST(fields.at("target_modules") == json({"c_attn", "c_proj"}));
  BOOST_TEST(fields.at("bias") == "none");
  BOOST_TEST(fields.at("fan_in_fan_out") == true);
  BOOST_TEST(fields.at("use_rslora") == false);
  BOOST_TEST(fields.at("use_dora") == false);
  BOOST_TEST(fields.at("init_lora_weights") == true);
  BOOST_TEST(fields.at("inference_mode") == true);
  BOOST_TEST(fields.at("modules_to_save").is_null());
  BOOST_TEST(fields.at("base_model_name_or_path") == "gpt2");

  // A fresh copy of the base model takes the same adapters.
  Toy copy(10);
  const nn::LoRAConfig loaded = nn::load_adapter(dir.string(), copy);
  BOOST_TEST(loaded.r == config.r);
  BOOST_TEST(loaded.lora_alpha == config.lora_alpha);
  BOOST_TEST(loaded.target_modules == config.target_modules, boost::test_tools::per_element());
  BOOST_TEST(loaded.fan_in_fan_out);
  BOOST_TEST(loaded.base_model_name_or_path == "gpt2");
  BOOST_TEST((values_of(copy) == values_of(toy)));
  BOOST_TEST(toy.forward(input(12)).to_vector() == copy.forward(input(12)).to_vector(),
             boost::test_tools::per_element());
  BOOST_TEST(names_of(nn::trainable_parameters(copy)) == names_of(nn::trainable_parameters(toy)),
             boost::test_tools::per_element());
  // Saved again, the same bytes.
  const fs::path again = fresh_folder("lora", "round_trip_again");
  nn::save_adapter(again.string(), copy, loaded);
  BOOST_TEST(file_bytes(again / "adapter_model.safetensors") == file_bytes(dir / "adapter_model.safetensors"));
  BOOST_TEST(file_bytes(again / "adapter_config.json") == file_bytes(dir / "adapter_config.json"));
}

BOOST_AUTO_TEST_CASE(a_config_as_peft_writes_it_loads) {
  const fs::path dir = fresh_folder("lora", "peft_config");
  Toy toy(13);
  nn::apply_lora(toy, {.r = 3, .lora_alpha = 6, .target_regex = R"(.*\.mlp\.c_fc)", .use_rslora = true});
  randomize_adapters(toy, 14);
  nn::save_adapter(dir.string(), toy,
                   {.r = 3, .lora_alpha = 6, .target_regex = R"(.*\.mlp\.c_fc)", .use_rslora = true});
  // PEFT's own file for these settings, with fields this code does not write (newer PEFTs).
  write_json(dir / "adapter_config.json",
             json::parse(R"({"alpha_pattern": {}, "auto_mapping": null, "base_model_name_or_path": null,
               "bias": "none", "corda_config": null, "eva_config": null, "exclude_modules": null,
               "fan_in_fan_out": false, "inference_mode": true, "init_lora_weights": true,
               "layer_replication": null, "layers_pattern": null, "layers_to_transform": null,
               "loftq_config": {}, "lora_alpha": 6, "lora_bias": false, "lora_dropout": 0.05,
               "megatron_config": null, "megatron_core": "megatron.core", "modules_to_save": null,
               "peft_type": "LORA", "peft_version": "0.17.0", "r": 3, "rank_pattern": {}, "revision": null,
               "runtime_config": {"ephemeral_gpu_offload": false}, "target_modules": ".*\\.mlp\\.c_fc",
               "task_type": "CAUSAL_LM", "trainable_token_indices": null, "use_dora": false,
               "use_rslora": true})"));
  Toy copy(13);
  const nn::LoRAConfig config = nn::load_adapter(dir.string(), copy);
  BOOST_TEST(config.target_regex == R"(.*\.mlp\.c_fc)");
  BOOST_TEST(config.lora_dropout == 0.05);
  BOOST_TEST(copy.h->named_children().size() == 2u);
  const auto& block = dynamic_cast<Block&>((*copy.h)[1]);
  BOOST_TEST(block.mlp->c_fc->lora_scaling() == 6 / std::sqrt(3.0));
  BOOST_TEST(!block.mlp->c_proj->has_lora());
  copy.eval();
  toy.eval();
  BOOST_TEST(toy.forward(input(15)).to_vector() == copy.forward(input(15)).to_vector(),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bad_input)

BOOST_AUTO_TEST_CASE(targets_and_settings) {
  Toy toy(20);
  const auto unchanged = [&] {
    for (const std::string& name : names_of(toy.named_parameters())) BOOST_TEST(!is_adapter(name), name);
    for (const auto& [name, p] : toy.named_parameters()) BOOST_TEST(p.requires_grad(), name);
  };
  check_error([&] { nn::apply_lora(toy, {.target_modules = {"q_proj"}}); }, {"apply_lora", "'q_proj'", "matches no"});
  check_error([&] { nn::apply_lora(toy, {.target_modules = {"c_attn", "v_proj"}}); }, {"'v_proj'"});
  check_error([&] { nn::apply_lora(toy, {.target_regex = "c_attn"}); }, {"regex 'c_attn'", "matches no"});
  check_error([&] { nn::apply_lora(toy, {.target_regex = "(c_attn"}); }, {"'(c_attn'", "not a valid"});
  check_error([&] { nn::apply_lora(toy, {}); }, {"no target_modules"});
  check_error([&] { nn::apply_lora(toy, {.target_modules = {"c_attn"}, .target_regex = ".*"}); }, {"not both"});
  check_error([&] { nn::apply_lora(toy, {.r = 0, .target_modules = {"c_attn"}}); }, {"r must be at least 1, got 0"});
  check_error([&] { nn::apply_lora(toy, {.lora_alpha = 0, .target_modules = {"c_attn"}}); }, {"lora_alpha", "0.0"});
  check_error([&] { nn::apply_lora(toy, {.lora_alpha = -2, .target_modules = {"c_attn"}}); }, {"lora_alpha", "-2.0"});
  check_error([&] { nn::apply_lora(toy, {.lora_dropout = 1, .target_modules = {"c_attn"}}); },
              {"lora_dropout 1.0", "[0, 1)"});
  check_error([&] { nn::apply_lora(toy, {.lora_dropout = -0.1, .target_modules = {"c_attn"}}); }, {"-0.1"});
  unchanged();

  nn::Linear linear(3, 2);
  check_error([&] { linear.add_lora({.rank = 0}); }, {"Linear.add_lora", "rank must be at least 1"});
  check_error([&] { linear.add_lora({.alpha = 0}); }, {"alpha must be positive"});
  check_error([&] { linear.add_lora({.alpha = NAN}); }, {"alpha must be positive"});
  check_error([&] { linear.add_lora({.dropout = 1.0}); }, {"dropout 1.0 is outside [0, 1)"});
  check_error([&] { linear.merge_lora(); }, {"Linear.merge_lora", "has no LoRA adapter"});
  check_error([&] { (void)linear.lora_scaling(); }, {"has no LoRA adapter"});
  BOOST_TEST(linear.named_parameters().size() == 2u);
  linear.add_lora({.rank = 1});
  check_error([&] { linear.add_lora({.rank = 1}); }, {"already has a LoRA adapter"});

  nn::apply_lora(toy, {.target_modules = {"c_fc"}});
  check_error(
      [&] {
        nn::apply_lora(toy, {.target_modules = {"c_attn", "c_fc"}});
      },
      {"'h.0.mlp.c_fc' already has a LoRA adapter"});
  BOOST_TEST(!dynamic_cast<Block&>((*toy.h)[0]).attn->c_attn->has_lora());
}

BOOST_AUTO_TEST_CASE(saving_an_adapter_the_config_does_not_describe) {
  const fs::path dir = fresh_folder("lora", "bad_save") / "out";
  Toy toy(21);
  nn::apply_lora(toy, gpt2_config());
  nn::LoRAConfig other_rank = gpt2_config();
  other_rank.r = 4;
  check_error([&] { nn::save_adapter(dir.string(), toy, other_rank); },
              {"save_adapter", "'h.0.attn.c_attn' has an adapter of rank 2", "r 4"});
  check_error([&] { nn::save_adapter(dir.string(), toy, {.r = 2, .lora_alpha = 16, .target_modules = {"c_attn"}}); },
              {"'h.0.attn.c_proj' has a LoRA adapter that the config's targets do not name"});
  check_error([&] { nn::save_adapter(dir.string(), toy, {.r = 2, .lora_alpha = 16, .target_modules = {"c_fc"}}); },
              {"'h.0.mlp.c_fc' is a target of the config but has no LoRA adapter"});
  BOOST_TEST(!fs::exists(dir));
  put_file(dir.parent_path() / "file", "x");
  check_error([&] { nn::save_adapter((dir.parent_path() / "file").string(), toy, gpt2_config()); },
              {"cannot make the folder"});
}

BOOST_AUTO_TEST_CASE(adapter_files_that_do_not_fit_the_model) {
  const fs::path dir = fresh_folder("lora", "bad_files");
  Toy toy(22);
  nn::apply_lora(toy, gpt2_config());
  nn::save_adapter(dir.string(), toy, gpt2_config());
  const std::string weights = (dir / "adapter_model.safetensors").string();
  const StateDict good = nn::read_safetensors(weights).tensors;

  Toy fresh(22);
  const auto check_unchanged = [&] {
    BOOST_TEST(nn::trainable_parameters(fresh).size() == fresh.named_parameters().size());
    for (const std::string& name : names_of(fresh.named_parameters())) BOOST_TEST(!is_adapter(name), name);
  };
  const auto load = [&] { nn::load_adapter(dir.string(), fresh); };

  StateDict missing = good;
  missing.erase("base_model.model.h.1.attn.c_proj.lora_B.weight");
  nn::write_safetensors(weights, missing);
  check_error(load,
              {"load_adapter", "adapter_model.safetensors", "missing: base_model.model.h.1.attn.c_proj.lora_B.weight"});
  check_unchanged();

  StateDict extra = good;
  extra.emplace("base_model.model.h.0.mlp.c_fc.lora_A.weight", Tensor::zeros({2, 4}));
  nn::write_safetensors(weights, extra);
  check_error(load, {"unexpected: base_model.model.h.0.mlp.c_fc.lora_A.weight"});
  check_unchanged();

  StateDict wrong_shape = good;
  wrong_shape["base_model.model.h.0.attn.c_attn.lora_A.weight"] = Tensor::zeros({3, 4});
  nn::write_safetensors(weights, wrong_shape);
  check_error(load, {"shape mismatch: base_model.model.h.0.attn.c_attn.lora_A.weight is [3, 4] in the file, "
                     "the model needs [2, 4]"});
  check_unchanged();

  nn::write_safetensors(weights, good);
  Toy narrower(22, 6);  // the same names at other widths
  check_error([&] { nn::load_adapter(dir.string(), narrower); }, {"is [2, 4] in the file, the model needs [2, 6]"});

  fs::remove(weights);
  check_error(load, {"adapter_model.safetensors"});
  check_unchanged();
}

BOOST_AUTO_TEST_CASE(bad_config_fields_are_named) {
  const fs::path dir = fresh_folder("lora", "bad_config");
  Toy toy(23);
  nn::apply_lora(toy, gpt2_config());
  nn::save_adapter(dir.string(), toy, gpt2_config());
  const fs::path path = dir / "adapter_config.json";
  const json good = json::parse(file_bytes(path));
  const auto with = [&](const char* field, const json& value) {
    json fields = good;
    if (value.is_discarded())
      fields.erase(field);
    else
      fields[field] = value;
    write_json(path, fields);
  };
  const json absent = json(json::value_t::discarded);
  Toy fresh(23);
  const auto load = [&] { nn::load_adapter(dir.string(), fresh); };
  const struct {
    const char* field;
    json value;
    std::string message;
  } cases[] = {
      {"peft_type", "PREFIX_TUNING", "field 'peft_type' is \"PREFIX_TUNING\""},
      {"peft_type", absent, "field 'peft_type' is missing"},
      {"r", absent, "field 'r' is missing"},
      {"r", "8", "field 'r' must be a positive integer, got \"8\""},
      {"r", 0, "field 'r' must be a positive integer, got 0"},
      {"r", 2.5, "field 'r' must be a positive integer, got 2.5"},
      {"r", -2, "field 'r' must be a positive integer, got -2"},
      {"lora_alpha", absent, "field 'lora_alpha' is missing"},
      {"lora_alpha", -1, "field 'lora_alpha' must be a positive number, got -1"},
      {"lora_alpha", "16", "field 'lora_alpha' must be a positive number"},
      {"lora_dropout", 1.5, "field 'lora_dropout' must be a number in [0, 1), got 1.5"},
      {"lora_dropout", true, "field 'lora_dropout' must be a number"},
      {"target_modules", absent, "field 'target_modules' is missing"},
      {"target_modules", nullptr, "field 'target_modules' is missing"},
      {"target_modules", json::array(), "field 'target_modules' must be a non-empty list"},
      {"target_modules", json({"c_attn", 3}), "field 'target_modules' must be"},
      {"target_modules", "all-linear", "\"all-linear\" is not supported"},
      {"target_modules", json({"q_proj"}), "target module 'q_proj' matches no Linear"},
      {"use_rslora", "yes", "field 'use_rslora' must be true or false, got \"yes\""},
      {"fan_in_fan_out", 1, "field 'fan_in_fan_out' must be true or false"},
      {"task_type", 3, "field 'task_type' must be a string"},
      {"use_dora", true, "field 'use_dora' is true, which xgrad's LoRA does not implement"},
      {"bias", "all", "field 'bias' is \"all\""},
      {"modules_to_save", json({"lm_head"}), "field 'modules_to_save'"},
      {"rank_pattern", json({{"c_attn", 4}}), "field 'rank_pattern'"},
      {"layers_to_transform", json({0}), "field 'layers_to_transform'"},
  };
  for (const auto& c : cases) {
    with(c.field, c.value);
    BOOST_TEST_CONTEXT(c.field << " = " << c.value.dump()) { check_error(load, {"adapter_config.json", c.message}); }
    BOOST_TEST(nn::trainable_parameters(fresh).size() == fresh.named_parameters().size());
  }
  put_file(path, "{\"peft_type\": \"LORA\",");
  check_error(load, {"adapter config", "adapter_config.json", "is not valid JSON"});
  put_file(path, "[1, 2]");
  check_error(load, {"adapter_config.json", "is not a JSON object"});
  fs::remove(path);
  check_error(load, {"adapter_config.json"});
  BOOST_TEST(nn::trainable_parameters(fresh).size() == fresh.named_parameters().size());
}

BOOST_AUTO_TEST_SUITE_END()
