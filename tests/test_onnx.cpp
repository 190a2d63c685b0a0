#define BOOST_TEST_MODULE onnx
// ONNX export (models/onnx.cpp): the refusals (an existing file without overwrite, LoRA
// adapters, a folder that is not there) and the written file's structure, read back with
// onnx.proto's classes: the inputs, outputs and opset the runtimes rely on, and every
// weight stored once, in float32, in the layout its op reads. What the graph computes is
// onnx_export's (tests/onnx_export_test.sh: onnxruntime against xgrad's logits).
#include <onnx/onnx_pb.h>

#include <cstring>
#include <set>
#include <variant>

#include "helpers.hpp"
#include "small_models.hpp"
#include "xgrad/models/models.hpp"
#include "xgrad/nn/lora.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {

std::string folder(const std::string& name) { return fresh_folder("test-onnx", name).string(); }

onnx::ModelProto read_model(const std::string& path) {
  onnx::ModelProto model;
  BOOST_REQUIRE(model.ParseFromString(file_bytes(path)));
  return model;
}

// A [batch, sequence(, vocab)] tensor type's dims as text: "batch", "sequence", "11".
std::vector<std::string> dims_of(const onnx::ValueInfoProto& value) {
  std::vector<std::string> dims;
  for (const auto& d : value.type().tensor_type().shape().dim())
    dims.push_back(d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
  return dims;
}

// The initializer's float32 values.
std::vector<float> floats(const onnx::TensorProto& t) {
  std::vector<float> values(t.raw_data().size() / sizeof(float));
  std::memcpy(values.data(), t.raw_data().data(), values.size() * sizeof(float));
  return values;
}

// The file of `model` against the model: interface, opset, and the weights, each once,
// in float32 and in their ops' layouts (Linears [in, out], embeddings as they are).
void check_structure(const models::PretrainedModel& model, bool tied) {
  const std::string path = folder(model.type_name()) + "/model.onnx";
  models::save_onnx(model, path);
  const onnx::ModelProto file = read_model(path);
  BOOST_TEST(file.ir_version() == 8);
  BOOST_REQUIRE_EQUAL(file.opset_import_size(), 1);
  BOOST_TEST(file.opset_import(0).domain() == "");
  BOOST_TEST(file.opset_import(0).version() == 17);
  BOOST_TEST(file.producer_name() == "xgrad");
  const onnx::GraphProto& graph = file.graph();
  BOOST_REQUIRE_EQUAL(graph.input_size(), 1);
  BOOST_REQUIRE_EQUAL(graph.output_size(), 1);
  BOOST_TEST(graph.input(0).name() == "input_ids");
  BOOST_TEST(graph.input(0).type().tensor_type().elem_type() == onnx::TensorProto::INT64);
  BOOST_TEST(dims_of(graph.input(0)) == (std::vector<std::string>{"batch", "sequence"}),
             boost::test_tools::per_element());
  BOOST_TEST(graph.output(0).name() == "logits");
  BOOST_TEST(graph.output(0).type().tensor_type().elem_type() == onnx::TensorProto::FLOAT);
  BOOST_TEST(
      dims_of(graph.output(0)) == (std::vector<std::string>{"batch", "sequence", std::to_string(model.vocab_size())}),
      boost::test_tools::per_element());

  const StateDict state = model.state_dict();
  std::set<std::string> names, expected;
  std::size_t bytes = 0, weight_bytes = 0;
  for (const onnx::TensorProto& t : graph.initializer()) {
    BOOST_TEST_CONTEXT(t.name()) {
      BOOST_TEST(names.insert(t.name()).second, "stored twice");
      BOOST_TEST(t.data_type() == onnx::TensorProto::FLOAT);
      BOOST_TEST(t.raw_data().size() % sizeof(float) == 0u);
      bytes += t.raw_data().size();
      const auto found = state.find(t.name());
      if (found == state.end()) continue;  // RoPE's tables, checked below
      weight_bytes += t.raw_data().size();
      const Shape shape = found->second.shape();
      const std::vector<double> values = found->second.to_vector();
      const std::vector<float> stored = floats(t);
      BOOST_REQUIRE_EQUAL(stored.size(), values.size());
      // Linears' weights ([out, in]) are stored [in, out], for MatMul; the rest as they are.
      const bool linear = shape.size() == 2 && !t.name().ends_with("wte.weight") && !t.name().ends_with("wpe.weight") &&
                          !t.name().ends_with("embed_tokens.weight");
      const Shape stored_shape(t.dims().begin(), t.dims().end());
      BOOST_TEST(stored_shape == (linear ? Shape{shape[1], shape[0]} : shape), boost::test_tools::per_element());
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < values.size(); ++i) {
        const std::size_t at = linear ? (i % shape[1]) * shape[0] + i / shape[1] : i;
        mismatches += stored[at] != static_cast<float>(values[i]);
      }
      BOOST_TEST(mismatches == 0u);
    }
  }
  for (const auto& [name, tensor] : state) expected.insert(name);
  BOOST_TEST(weight_bytes == model.num_parameters() * sizeof(float));
  // A tied head reads the embedding's initializer: no copy under the head's name.
  BOOST_TEST(names.contains("lm_head.weight") == !tied);
  std::set<std::string> stored_weights;
  for (const std::string& name : names)
    if (state.contains(name)) stored_weights.insert(name);
  BOOST_TEST(stored_weights == expected, boost::test_tools::per_element());
  // Only Llama has more: RoPE's cos and sin, [max positions, head_dim / 2] each.
  std::size_t tables = 0;
  const models::ModelConfig config = model.config();
  if (const auto* llama = std::get_if<models::LlamaConfig>(&config))
    tables = 2 * llama->max_position_embeddings * (llama->head_width() / 2) * sizeof(float);
  BOOST_TEST(bytes == weight_bytes + tables);

  // Every op is opset 17's (the default domain), and no weight is transposed at run time.
  for (const onnx::NodeProto& node : graph.node()) {
    BOOST_TEST(node.domain() == "", node.op_type());
    if (node.op_type() == "Transpose") BOOST_TEST(!names.contains(node.input(0)), node.name());
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_file_reads_back_with_its_interface_and_every_weight_once) {
  manual_seed(1);
  for (bool tied : {true, false}) {
    BOOST_TEST_CONTEXT("tied " << tied) {
      check_structure(*models::make_model(small_gpt2(tied)), tied);
      check_structure(*models::make_model(small_llama(2, tied)), tied);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_float64_model_is_stored_as_float32) {
  manual_seed(2);
  auto model = models::make_model(small_llama(2, false));
  const std::string dir = folder("float64");
  models::save_onnx(*model, dir + "/float32.onnx");
  model->to(DType::float64);
  models::save_onnx(*model, dir + "/float64.onnx");
  // The same values, rounded to float32 either way: the same file.
  BOOST_TEST((file_bytes(dir + "/float32.onnx") == file_bytes(dir + "/float64.onnx")));
}

BOOST_AUTO_TEST_CASE(an_existing_file_is_refused_unless_overwrite_is_set) {
  manual_seed(3);
  const auto model = models::make_model(small_gpt2(true));
  const std::string path = folder("existing") + "/model.onnx";
  put_file(path, "not a model");
  check_error([&] { models::save_onnx(*model, path); }, {"save_onnx", path, "exists", "overwrite"});
  BOOST_TEST(file_bytes(path) == "not a model");
  models::save_onnx(*model, path, {.overwrite = true});
  BOOST_TEST(read_model(path).graph().output(0).name() == "logits");
}

BOOST_AUTO_TEST_CASE(a_model_with_lora_adapters_is_refused) {
  manual_seed(4);
  auto model = models::make_model(small_llama(2, true));
  nn::apply_lora(*model, {.r = 2, .target_modules = {"q_proj", "v_proj"}});
  const std::string path = folder("lora") + "/model.onnx";
  check_error([&] { models::save_onnx(*model, path); }, {"save_onnx", "LoRA", ".lora_", "merge"});
  BOOST_TEST(!std::filesystem::exists(path));
  nn::merge_lora(*model);  // merged, it exports
  models::save_onnx(*model, path);
  BOOST_TEST(std::filesystem::exists(path));
}

BOOST_AUTO_TEST_CASE(a_folder_that_is_not_there_is_an_error) {
  manual_seed(5);
  const auto model = models::make_model(small_gpt2(false));
  const std::string dir = folder("missing");
  const std::string path = dir + "/not-there/model.onnx";
  check_error([&] { models::save_onnx(*model, path); }, {"save_onnx", "not-there"});
  BOOST_TEST(std::filesystem::is_empty(dir));
}

BOOST_AUTO_TEST_CASE(a_model_past_protobufs_2_gib_is_refused_before_it_is_built) {
  // RoPE's tables alone, [max positions, head_dim / 2] twice, pass 2 GiB here: cheap to
  // make (Llama has no position weights), refused before anything is allocated.
  models::LlamaConfig c = small_llama(2, true);
  const std::string path = folder("too-large") + "/model.onnx";
  // 2^27 positions * 4 head_dim * 4 bytes = 2 GiB; 2^61 and 2^64 - 1 overflowed a count
  // of bytes in size_t.
  for (const std::size_t positions : {std::size_t{1} << 27, std::size_t{1} << 61, ~std::size_t{0}}) {
    c.max_position_embeddings = positions;
    const auto model = models::make_model(c);
    check_error([&] { models::save_onnx(*model, path); }, {"save_onnx", "2 GiB", path});
    BOOST_TEST(!std::filesystem::exists(path));
  }
}
