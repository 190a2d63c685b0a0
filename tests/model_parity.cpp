// The xgrad side of the model parity test (tests/model_parity_test.py holds it to a plain
// PyTorch GPT-2 and Llama under Hugging Face's names):
//
//   model_parity init FAMILY CONFIG_JSON SEED DIR   a random model of the config's family
//                                                   (gpt2 | llama), saved as a Hugging Face
//                                                   directory in DIR
//   model_parity forward DIR TOKENS OUT             loads DIR in float64; TOKENS holds
//                                                   "tokens" and "targets" [N, T]; OUT gets
//                                                   "logits", "loss" (mean cross-entropy)
//                                                   and "grad.<name>" for every tensor in
//                                                   the directory, in its files' layout
//
// Errors: one line on stderr, exit 2, nothing written.
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>

#include "xgrad/xgrad.hpp"

using namespace xgrad;

namespace {

Indices read_ids(const nn::SafetensorsContents& contents, const std::string& name, const std::string& file) {
  const auto found = contents.tensors.find(name);
  XGRAD_CHECK(found != contents.tensors.end(), "model_parity", file, " has no \"", name, "\"");
  std::vector<std::int64_t> ids;
  for (const double v : found->second.to_vector()) ids.push_back(static_cast<std::int64_t>(v));
  return Indices(ids, found->second.shape());
}

int init(const std::string& family, const std::string& config_path, const std::string& seed, const std::string& dir) {
  const models::ModelConfig config = models::read_model_config(config_path);
  XGRAD_CHECK(models::model_type(config) == family, "model_parity", config_path, " is a ", models::model_type(config),
              " config, not ", family);
  manual_seed(std::stoull(seed));
  models::save_pretrained(*models::make_model(config), dir);
  return 0;
}

int forward(const std::string& dir, const std::string& tokens_path, const std::string& out) {
  const auto model = models::load_pretrained(dir, DType::float64);
  const nn::SafetensorsContents batch = nn::read_safetensors(tokens_path);
  const Indices tokens = read_ids(batch, "tokens", tokens_path), targets = read_ids(batch, "targets", tokens_path);
  const Tensor logits = model->forward(tokens);
  const std::size_t V = model->vocab_size();
  const Tensor loss =
      cross_entropy(reshape(logits, {-1, static_cast<std::int64_t>(V)}), Indices(targets.values, {targets.numel()}));
  loss.backward();
  StateDict results{{"logits", logits.detach()}, {"loss", loss.detach()}};
  // The gradients in the files' layout: the same turn hf_state_dict() gives the weights.
  const StateDict weights = model->state_dict();
  StateDict grads;
  for (const auto& [name, weight] : weights) grads[name] = weight.grad();
  const StateDict laid_out = [&] {
    auto copy = models::make_model(model->config());
    copy->to(DType::float64);
    copy->load_state_dict(grads);
    return copy->hf_state_dict();
  }();
  for (const auto& [name, grad] : laid_out) results["grad." + name] = grad;
  nn::write_safetensors(out, results);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 5 && args[0] == "init") return init(args[1], args[2], args[3], args[4]);
    if (args.size() == 4 && args[0] == "forward") return forward(args[1], args[2], args[3]);
    std::cerr << "usage: model_parity init FAMILY CONFIG SEED DIR | model_parity forward DIR TOKENS OUT\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "model_parity: " << e.what() << "\n";
    return 2;
  }
}
