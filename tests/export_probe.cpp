// xgrad's side of the export checks (onnx_export_test.sh): models made, run and exported
// here, then read by the outside runtimes.
//   random CONFIG_JSON SEED DIR   a model of the config with every parameter drawn anew
//                                 (matrices N(0, 0.2), biases N(0, 0.1), norm gains
//                                 1 + N(0, 0.1)), so that no weight left at its initial 0
//                                 or 1 hides a mapping bug, and the logits of small models
//                                 span a few units; saved as a Hugging Face directory
//   logits DIR TOKENS_JSON OUT    the directory's logits (float32, eval, no grad) for the
//                                 batch [[ids...], ...] (rows of one length), written as
//                                 raw little-endian float32 [B, T, vocab]
//   greedy DIR PROMPT_JSON COUNT OUT_JSON
//                                 the directory's greedy continuation (argmax, the whole
//                                 window run again for each token) of the prompt [ids...]:
//                                 COUNT ids, as a JSON array
//   onnx DIR OUT.onnx             the directory exported to ONNX (models::save_onnx)
// Bad input: one line on stderr, exit 2.
#include <algorithm>
#include <bit>
#include <iostream>
#include <nlohmann/json.hpp>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/random.hpp"
#include "xgrad/models/models.hpp"
#include "xgrad/nn/init.hpp"

using namespace xgrad;

namespace {

constexpr const char* kProbe = "export_probe";
static_assert(std::endian::native == std::endian::little, "the logits are written as the machine lays them out");

void random_model(const std::string& config_path, const std::string& seed, const std::string& dir) {
  const models::ModelConfig config = models::parse_model_config(read_regular_file(config_path, kProbe), config_path);
  manual_seed(std::stoull(seed));
  auto model = models::make_model(config);
  NoGradGuard no_grad;
  for (auto& [name, p] : model->named_parameters()) {
    const bool gain = p.dim() == 1 && !name.ends_with(".bias");  // LayerNorm's and RMSNorm's weights
    nn::init::normal_(p, gain ? 1.0 : 0.0, p.dim() == 2 ? 0.2 : 0.1);
  }
  models::save_pretrained(*model, dir);
}

void logits(const std::string& dir, const std::string& tokens_path, const std::string& out_path) {
  auto model = models::load_pretrained(dir);
  model->eval();
  const nlohmann::json rows = nlohmann::json::parse(read_regular_file(tokens_path, kProbe));
  XGRAD_CHECK(rows.is_array() && !rows.empty() && rows[0].is_array(), kProbe, tokens_path,
              ": expected [[ids...], ...]");
  std::vector<std::int64_t> ids;
  for (const nlohmann::json& row : rows) {
    XGRAD_CHECK(row.is_array() && row.size() == rows[0].size(), kProbe, tokens_path, ": rows of different lengths");
    for (const nlohmann::json& id : row) ids.push_back(id.get<std::int64_t>());
  }
  NoGradGuard no_grad;
  const Tensor out = model->forward(Indices(ids, {rows.size(), rows[0].size()}));
  XGRAD_CHECK(out.dtype() == DType::float32, kProbe, "logits are ", out.dtype(), ", not float32");
  const float* data = out.data<float>();
  write_file_atomically(out_path, std::string(reinterpret_cast<const char*>(data), out.numel() * sizeof(float)),
                        kProbe);
}

void greedy(const std::string& dir, const std::string& prompt_path, const std::string& count,
            const std::string& out_path) {
  auto model = models::load_pretrained(dir);
  model->eval();
  std::vector<std::int64_t> ids = nlohmann::json::parse(read_regular_file(prompt_path, kProbe));
  const std::size_t prompt = ids.size();
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < std::stoul(count); ++i) {
    const Tensor logits = model->forward(Indices(ids, {1, ids.size()}));
    const float* last = logits.data<float>() + (ids.size() - 1) * model->vocab_size();
    ids.push_back(std::max_element(last, last + model->vocab_size()) - last);
  }
  write_file_atomically(out_path, nlohmann::json(std::vector<std::int64_t>(ids.begin() + prompt, ids.end())).dump(),
                        kProbe);
}

int run(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: export_probe random CONFIG_JSON SEED DIR | logits DIR TOKENS_JSON OUT_BIN | greedy DIR PROMPT_JSON COUNT "
      "OUT_JSON | onnx DIR OUT.onnx";
  XGRAD_CHECK(!args.empty(), kProbe, usage);
  const std::string& command = args[0];
  if (command == "random" && args.size() == 4)
    random_model(args[1], args[2], args[3]);
  else if (command == "logits" && args.size() == 4)
    logits(args[1], args[2], args[3]);
  else if (command == "greedy" && args.size() == 5)
    greedy(args[1], args[2], args[3], args[4]);
  else if (command == "onnx" && args.size() == 3)
    models::save_onnx(*models::load_pretrained(args[1]), args[2]);
  else
    fail(kProbe, usage);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
