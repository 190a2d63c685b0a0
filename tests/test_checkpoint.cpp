#define BOOST_TEST_MODULE checkpoint
#include "helpers.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "xgrad/nn/nn.hpp"
#include "xgrad/optim/optim.hpp"

using namespace xgrad;
using namespace xgrad::test;
namespace fs = std::filesystem;

namespace {

// A small model with both kinds of state: parameters and a persistent buffer.
class Net : public nn::Module {
 public:
  Net() {
    body = register_module("body", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                                       std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
                                       std::make_shared<nn::Linear>(8, 3)}));
    register_buffer("seen", Tensor::zeros({1}));
  }
  Tensor forward(const Tensor& x) override { return body->forward(x); }
  std::shared_ptr<nn::Sequential> body;
};

struct Data {
  Tensor x;
  Indices y = Indices({0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, {16});
  Data() {
    Generator gen(1);
    x = Tensor::randn({16, 4}, gen);
  }
};

// The layout of the numpy-written fixture: linear.weight [3, 4], linear.bias [3], scale [].
class FromNumpy : public nn::Module {
 public:
  FromNumpy() : linear(register_module("linear", std::make_shared<nn::Linear>(4, 3))) {
    scale = register_parameter("scale", Tensor::scalar(1.0));
  }
  std::shared_ptr<nn::Linear> linear;
  Tensor scale;
};

std::vector<double> train(Net& net, optim::Optimizer& opt, int steps, const Data& data = Data{}) {
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net(data.x), data.y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  return losses;
}

std::vector<double> flat(const nn::Module& m) {
  std::vector<double> all;
  for (const auto& [name, t] : m.state_dict()) {
    const auto v = t.to_vector();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("xgrad-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

}  // namespace

BOOST_AUTO_TEST_CASE(the_byte_layout_is_safetensors) {
  const StateDict tensors = {{"a", Tensor::from_vector({1, 2, 3}, {3}, DType::float32)},
                             {"b", Tensor::from_vector({0.5, -0.25}, {2, 1}, DType::float64)}};
  const std::string bytes = nn::encode_safetensors(tensors, {{"step", "3"}});
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  BOOST_CHECK_EQUAL(length % 8, 0u);  // data starts aligned
  const std::string header = bytes.substr(8, length);
  BOOST_CHECK(header.find("\"a\":{\"data_offsets\":[16,28],\"dtype\":\"F32\",\"shape\":[3]}") != std::string::npos);
  BOOST_CHECK(header.find("\"b\":{\"data_offsets\":[0,16],\"dtype\":\"F64\",\"shape\":[2,1]}") != std::string::npos);
  BOOST_CHECK(header.find("\"__metadata__\":{\"step\":\"3\"}") != std::string::npos);
  BOOST_CHECK_EQUAL(bytes.size(), 8 + length + 28);
  double first = 0;
  std::memcpy(&first, bytes.data() + 8 + length, 8);
  BOOST_CHECK_EQUAL(first, 0.5);

  const nn::SafetensorsContents back = nn::decode_safetensors(bytes);
  BOOST_CHECK(back.metadata == (nn::Metadata{{"step", "3"}}));
  BOOST_CHECK(back.tensors.at("a").dtype() == DType::float32);
  BOOST_CHECK(back.tensors.at("b").shape() == (Shape{2, 1}));
  check_close(back.tensors.at("a").to_vector(), {1, 2, 3});
  check_close(back.tensors.at("b").to_vector(), {0.5, -0.25});
}

BOOST_AUTO_TEST_CASE(save_load_and_continue_bitwise_identically) {
  const Data data;
  manual_seed(5);
  Net net;
  optim::Adam adam(net.named_parameters(), {.lr = 0.01});
  train(net, adam, 4, data);
  const fs::path path = scratch("resume.safetensors");
  nn::save(path, net, &adam, {{"step", "4"}, {"task", "toy"}});
  const std::vector<double> uninterrupted = train(net, adam, 5, data);

  manual_seed(6);  // a different starting point, overwritten by the load
  Net fresh;
  optim::Adam fresh_adam(fresh.named_parameters(), {.lr = 0.5});
  const nn::Metadata meta = nn::load(path, fresh, &fresh_adam);
  BOOST_CHECK_EQUAL(meta.at("step"), "4");
  BOOST_CHECK_EQUAL(fresh_adam.step_count(), 4);
  const std::vector<double> resumed = train(fresh, fresh_adam, 5, data);
  BOOST_CHECK(resumed == uninterrupted);
  BOOST_CHECK(flat(fresh) == flat(net));
}

BOOST_AUTO_TEST_CASE(a_save_replaces_the_old_file_and_leaves_nothing_else) {
  Net net;
  const fs::path path = scratch("replace.safetensors");
  nn::save(path, net);
  const std::string first = read_bytes(path);
  Tensor weight = net.state_dict().at("body.0.weight");
  nn::init::zeros_(weight);
  nn::save(path, net);
  BOOST_CHECK(read_bytes(path) != first);
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(path.parent_path()))
    files += entry.path().filename().string().rfind("replace.safetensors", 0) == 0;
  BOOST_CHECK_EQUAL(files, 1u);  // no temporary file left behind
  check_error([&] { nn::save("/nonexistent-folder/x.safetensors", net); }, {"save", "/nonexistent-folder"});
}

BOOST_AUTO_TEST_CASE(every_damaged_file_is_rejected_and_changes_nothing) {
  manual_seed(7);
  Net net;
  optim::SGD sgd(net.named_parameters(), {.lr = 0.1, .momentum = 0.9});
  train(net, sgd, 2);
  const std::string good = nn::encode_safetensors(net.state_dict(), {{"step", "2"}});
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, good.data(), 8);
  const std::vector<double> before = flat(net);
  const fs::path path = scratch("damaged.safetensors");
  std::size_t rejected = 0, tried = 0;
  const auto expect_rejected = [&](const std::string& bytes, const std::string& what) {
    ++tried;
    write_bytes(path, bytes);
    try {
      nn::load(path, net);
      BOOST_ERROR("accepted a damaged file: " << what);
    } catch (const Error& e) {
      ++rejected;
      BOOST_CHECK_MESSAGE(std::string(e.what()).find(path.string()) != std::string::npos, e.what());
    }
  };
  for (std::size_t cut = 0; cut < good.size(); cut += 7)
    expect_rejected(good.substr(0, cut), "truncated at " + std::to_string(cut));
  for (std::size_t at = 8; at < 8 + header_length; ++at) {
    std::string flipped = good;
    flipped[at] = static_cast<char>(flipped[at] ^ 0xFF);
    expect_rejected(flipped, "header byte " + std::to_string(at) + " flipped");
  }
  const auto with_header = [&](std::string header) {
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string bytes(8, '\0');
    const std::uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    return bytes + header + std::string(16, '\0');
  };
  std::string huge = good;
  const std::uint64_t too_long = good.size();
  std::memcpy(huge.data(), &too_long, 8);
  expect_rejected(huge, "header length past the end");
  expect_rejected(with_header(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,1600]}})"), "offsets past the end");
  expect_rejected(with_header(R"({"x":{"dtype":"I8","shape":[16],"data_offsets":[0,16]}})"), "unsupported dtype");
  expect_rejected(with_header(R"({"x":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}})"),
                  "shape and offsets disagree");
  expect_rejected(
      with_header(
          R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"y":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})"),
      "overlap");
  expect_rejected(with_header(R"({"x":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})"), "negative shape");
  expect_rejected(with_header(R"([1, 2, 3])"), "not an object");
  expect_rejected(with_header(R"({"__metadata__":{"step":3}})"), "non-string metadata");
  expect_rejected("", "empty file");
  expect_rejected("hello, this is not a checkpoint at all", "a text file");
  // Well-formed, but for another model: wrong shape, or missing names.
  StateDict other = net.state_dict();
  other["body.0.weight"] = Tensor::zeros({4, 8});
  expect_rejected(nn::encode_safetensors(other), "wrong shape");
  other.erase("body.0.weight");
  expect_rejected(nn::encode_safetensors(other), "missing tensor");
  BOOST_CHECK_EQUAL(rejected, tried);
  BOOST_CHECK(flat(net) == before);
  BOOST_TEST_MESSAGE(tried << " damaged files rejected");
}

BOOST_AUTO_TEST_CASE(a_failed_optimizer_load_restores_the_model) {
  Net net;
  optim::Adam adam(net.named_parameters(), {.lr = 0.01});
  train(net, adam, 1);
  const fs::path path = scratch("model-only.safetensors");
  Net other;
  nn::save(path, other);  // no optimizer state
  const std::vector<double> before = flat(net);
  check_error([&] { nn::load(path, net, &adam); }, {"no optimizer state"});
  BOOST_CHECK(flat(net) == before);
  // An optimizer whose state does not fit: the model was loaded first, then restored.
  optim::SGD sgd(other.named_parameters(), {.lr = 0.1, .momentum = 0.9});
  train(other, sgd, 1);
  nn::save(path, other, &sgd);
  check_error([&] { nn::load(path, net, &adam); }, {"Adam: load_state_dict", "unexpected"});
  BOOST_CHECK(flat(net) == before);
}

BOOST_AUTO_TEST_CASE(reads_a_file_written_by_numpy) {
  const nn::SafetensorsContents c = nn::read_safetensors(XGRAD_REFERENCE_DIR "/numpy_written.safetensors");
  BOOST_CHECK(c.metadata == (nn::Metadata{{"step", "7"}, {"written_by", "numpy"}}));
  const Tensor& w = c.tensors.at("linear.weight");
  BOOST_CHECK(w.dtype() == DType::float32 && w.shape() == (Shape{3, 4}));
  std::vector<double> expected;
  for (int i = 0; i < 12; ++i) expected.push_back(i * 0.5 - 1.0);
  check_close(w.to_vector(), expected);
  BOOST_CHECK(c.tensors.at("linear.bias").dtype() == DType::float64);
  check_close(c.tensors.at("linear.bias").to_vector(), {1.5, -2.0, 0.25});
  BOOST_CHECK(c.tensors.at("scale").shape().empty());
  BOOST_CHECK_EQUAL(c.tensors.at("scale").item(), 3.0);
  // And it loads into a model of that layout (values converted to its float32).
  FromNumpy model;
  const nn::Metadata meta = nn::load(XGRAD_REFERENCE_DIR "/numpy_written.safetensors", model);
  BOOST_CHECK_EQUAL(meta.at("step"), "7");
  check_close(model.linear->bias.to_vector(), {1.5, -2.0, 0.25});
  BOOST_CHECK_EQUAL(model.scale.item(), 3.0);
}

BOOST_AUTO_TEST_CASE(empty_and_scalar_tensors_round_trip) {
  const StateDict tensors = {{"empty", Tensor::zeros({0, 4}, DType::float64)}, {"scalar", Tensor::scalar(1.5)}};
  const nn::SafetensorsContents back = nn::decode_safetensors(nn::encode_safetensors(tensors));
  BOOST_CHECK(back.tensors.at("empty").shape() == (Shape{0, 4}));
  BOOST_CHECK_EQUAL(back.tensors.at("scalar").item(), 1.5);
}

// Every input the fuzzer ever crashed on (tests/fuzz/regressions/) is now handled: it
// decodes or raises xgrad::Error (the sanitizer build checks the memory side).
BOOST_AUTO_TEST_CASE(fuzzer_findings_stay_fixed) {
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(XGRAD_REFERENCE_DIR "/../fuzz/regressions")) {
    ++files;
    try {
      for (const auto& [name, t] : nn::read_safetensors(entry.path()).tensors) (void)t.to_vector();
    } catch (const Error&) {
    }
  }
  BOOST_CHECK_GE(files, 1u);
}

// Writes the file that check_written_by_xgrad.py (run by ctest next) opens with numpy.
BOOST_AUTO_TEST_CASE(written_for_numpy) {
  std::vector<double> ramp;
  for (int i = 0; i < 6; ++i) ramp.push_back(i * 0.25);
  nn::write_safetensors(XGRAD_TEST_OUTPUT_DIR "/written_by_xgrad.safetensors",
                        {{"ramp", Tensor::from_vector(ramp, {2, 3}, DType::float32)},
                         {"column", Tensor::from_vector({1.0, -2.5, 1e-300}, {3, 1}, DType::float64)}},
                        {{"step", "42"}, {"task", "sort"}});
  BOOST_CHECK(fs::exists(XGRAD_TEST_OUTPUT_DIR "/written_by_xgrad.safetensors"));
}
