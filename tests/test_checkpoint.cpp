#define BOOST_TEST_MODULE checkpoint
#include "helpers.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "xgrad/autograd/files.hpp"
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

// Little-endian bytes of the given values.
template <class T>
std::string raw_bytes(std::initializer_list<T> values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  std::memcpy(bytes.data(), std::data(values), bytes.size());
  return bytes;
}

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

// The temporaries beside `target` (a writer's, named for this target).
std::vector<std::string> temporaries_of(const fs::path& target) {
  const std::string tag = temporary_name(target.string(), 0, 0);
  const std::string prefix = tag.substr(0, tag.find('-', std::strlen(kTemporaryPrefix)) + 1);
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(target.parent_path()))
    if (entry.path().filename().string().starts_with(prefix)) found.push_back(entry.path().filename().string());
  return found;
}

// A process that has exited (and been reaped): its pid names no process now.
pid_t a_dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

BOOST_AUTO_TEST_CASE(a_write_removes_what_dead_writers_left_and_nothing_else) {
  const fs::path folder = scratch("litter");
  fs::remove_all(folder);
  fs::create_directories(folder);
  const fs::path target = folder / "run.safetensors", other = folder / "other.safetensors";
  const pid_t dead = a_dead_pid();
  const auto place = [&](const std::string& name) {
    std::ofstream(folder / name) << "partial";
    return folder / name;
  };
  const fs::path dead_0 = place(temporary_name(target.string(), dead, 0));
  const fs::path dead_7 = place(temporary_name(target.string(), dead, 7));
  const fs::path alive = place(temporary_name(target.string(), ::getppid(), 0));  // still writing
  const fs::path other_target = place(temporary_name(other.string(), dead, 0));   // another file's
  const fs::path not_ours = place(".xgrad-notes.tmp"), user_file = place("draft.tmp");
  write_file_atomically(target.string(), "new", "save");
  BOOST_CHECK(!fs::exists(dead_0));
  BOOST_CHECK(!fs::exists(dead_7));
  for (const fs::path& kept : {alive, other_target, not_ours, user_file}) BOOST_CHECK_MESSAGE(fs::exists(kept), kept);
  BOOST_CHECK_EQUAL(read_bytes(target), "new");
}

BOOST_AUTO_TEST_CASE(a_writer_killed_mid_write_leaves_one_temporary_the_next_write_removes) {
  const fs::path folder = scratch("killed");
  fs::remove_all(folder);
  fs::create_directories(folder);
  const fs::path target = folder / "big.safetensors";
  for (int kill = 0; kill < 3; ++kill) {
    const pid_t writer = ::fork();
    if (writer == 0) {  // writes 32 MiB over and over until killed
      const std::string bytes(std::size_t{32} << 20, 'x');
      for (;;) write_file_atomically(target.string(), bytes, "save");
    }
    ::usleep(150'000 + 70'000 * kill);
    ::kill(writer, SIGKILL);
    ::waitpid(writer, nullptr, 0);
    BOOST_CHECK_LE(temporaries_of(target).size(), 1u);  // at most the one it was writing
  }
  write_file_atomically(target.string(), "done", "save");
  BOOST_CHECK(temporaries_of(target).empty());
  BOOST_CHECK_EQUAL(read_bytes(target), "done");
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
  const auto with_header = [](const std::string& header) { return safetensors_bytes(header, std::string(16, '\0')); };
  std::string huge = good;
  const std::uint64_t too_long = good.size();
  std::memcpy(huge.data(), &too_long, 8);
  expect_rejected(huge, "header length past the end");
  // Each refusal says what is wrong, truthfully.
  const auto refused_saying = [&](const std::string& bytes, const std::string& says) {
    write_bytes(path, bytes);
    check_error([&] { nn::load(path, net); }, {path.string(), says});
  };
  std::string over_cap = good;
  const std::uint64_t past_cap = (std::uint64_t{100} << 20) + 8;
  std::memcpy(over_cap.data(), &past_cap, 8);
  refused_saying(over_cap, "is over the 100 MiB a safetensors header may have");
  refused_saying(huge, "runs past the end of the file");
  // 1,000,000 nested arrays: refused as the nesting starts, never std::bad_alloc.
  refused_saying(with_header(R"({"x":)" + std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}"),
                 "nests deeper than a safetensors header");
  refused_saying(with_header(R"({"__metadata__":{"a":{"b":{"c":"d"}}}})"), "nests deeper");
  expect_rejected(with_header(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,1600]}})"), "offsets past the end");
  expect_rejected(with_header(R"({"x":{"dtype":"F8_E4M3","shape":[16],"data_offsets":[0,16]}})"), "unsupported dtype");
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

// The optimizer's entries share the "optimizer." prefix with a model's child of that name:
// what the model has is the model's, so such a model loads what it saved.
BOOST_AUTO_TEST_CASE(a_child_called_optimizer_round_trips) {
  struct Learned : nn::Module {
    std::shared_ptr<nn::Linear> body = register_module("body", std::make_shared<nn::Linear>(2, 2));
    std::shared_ptr<nn::Linear> optimizer = register_module("optimizer", std::make_shared<nn::Linear>(2, 2));
  };
  manual_seed(8);
  Learned saved;
  const fs::path path = scratch("child_optimizer.safetensors");
  nn::save(path, saved);
  manual_seed(9);
  Learned loaded;
  nn::load(path, loaded);
  BOOST_CHECK(loaded.optimizer->weight.to_vector() == saved.optimizer->weight.to_vector());
  BOOST_CHECK(loaded.body->bias.to_vector() == saved.body->bias.to_vector());
  optim::SGD sgd(loaded.named_parameters(), {.lr = 0.1});  // and with an optimizer beside it
  nn::save(path, loaded, &sgd);
  nn::load(path, saved, &sgd);
  BOOST_CHECK(saved.optimizer->bias.to_vector() == loaded.optimizer->bias.to_vector());
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

// One tensor per dtype that PyTorch and numpy write (make_safetensors_fixture.py), read
// exactly as torch converts it to float64: F16 and BF16 become float32 (infinities, NaN,
// signed zeros and subnormals included), integers and BOOL their values.
BOOST_AUTO_TEST_CASE(reads_every_dtype_torch_and_numpy_write) {
  const nn::SafetensorsContents c = nn::read_safetensors(XGRAD_REFERENCE_DIR "/dtypes_written.safetensors");
  std::ifstream in(XGRAD_REFERENCE_DIR "/dtypes_expected.json");
  const auto expected = nlohmann::json::parse(in).at("tensors");
  BOOST_CHECK_EQUAL(c.tensors.size(), expected.size());
  const std::set<std::string> wide = {"I32", "U32", "I64", "U64", "F64"};  // read as float64
  for (const auto& [name, want] : expected.items()) {
    BOOST_TEST_CONTEXT(name) {
      const std::string dtype = want.at("dtype");
      BOOST_REQUIRE(c.tensors.count(name));
      const Tensor& t = c.tensors.at(name);
      BOOST_CHECK_EQUAL(c.dtypes.at(name), dtype);
      BOOST_CHECK(t.dtype() == (wide.count(dtype) ? DType::float64 : DType::float32));
      BOOST_CHECK(t.shape() == want.at("shape").get<Shape>());
      const std::vector<double> got = t.to_vector();
      BOOST_REQUIRE_EQUAL(got.size(), want.at("values").size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        const auto& v = want.at("values")[i];
        if (v.is_string()) {
          const std::string special = v;
          BOOST_CHECK_MESSAGE(special == "nan" ? std::isnan(got[i]) : got[i] == (special == "inf" ? 1 : -1) * INFINITY,
                              name << "[" << i << "] is " << got[i] << ", torch has " << special);
        } else {  // bit for bit, the sign of zero included
          BOOST_CHECK_MESSAGE(got[i] == v.get<double>() && std::signbit(got[i]) == std::signbit(v.get<double>()),
                              name << "[" << i << "] is " << got[i] << ", torch has " << v.get<double>());
        }
      }
    }
  }
}

namespace {

// A float32 model whose state has the fixture's names: a bf16 weight, a BOOL mask, I64
// ids and an I64 step count as buffers.
class Mixed : public nn::Module {
 public:
  Mixed() {
    weight = register_parameter("bf16", Tensor::zeros({12}));
    mask = register_buffer("mask", Tensor::zeros({2, 3}));
    ids = register_buffer("ids", Tensor::zeros({2, 3}));
    step = register_buffer("step", Tensor::scalar(0.0));
  }
  Tensor weight, mask, ids, step;
};

// The fixture's I32 tensor, whose values run past 2^24.
class Wide : public nn::Module {
 public:
  Wide() { values = register_buffer("i32", Tensor::zeros({7})); }
  Tensor values;
};

nn::SafetensorsContents only(const nn::SafetensorsContents& all, std::initializer_list<const char*> names) {
  nn::SafetensorsContents some;
  for (const char* name : names) {
    some.tensors.emplace(name, all.tensors.at(name));
    some.dtypes.emplace(name, all.dtypes.at(name));
  }
  return some;
}

// Equal element by element, NaN equal to NaN.
bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(integers_halves_and_masks_load_into_a_model) {
  const std::string path = XGRAD_REFERENCE_DIR "/dtypes_written.safetensors";
  const nn::SafetensorsContents c = nn::read_safetensors(path);
  Mixed model;
  nn::load(only(c, {"bf16", "mask", "ids", "step"}), model, nullptr, path);
  BOOST_CHECK(model.weight.dtype() == DType::float32 && model.ids.dtype() == DType::float32);
  BOOST_CHECK(same_values(model.weight.to_vector(), c.tensors.at("bf16").to_vector()));
  check_close(model.mask.to_vector(), {1, 0, 1, 0, 0, 1});
  check_close(model.ids.to_vector(), {3, 0, 2, 1, 1, 4});
  BOOST_CHECK_EQUAL(model.step.item(), 1200.0);
  // I32 values past 2^24 do not fit a float32 buffer: refused, naming file, tensor and
  // dtype, and nothing changes.
  Wide wide;
  check_error([&] { nn::load(only(c, {"i32"}), wide, nullptr, path); },
              {path, "tensor 'i32'", "I32", "-16777217", "element 1", "float32"});
  BOOST_CHECK(wide.values.to_vector() == std::vector<double>(7, 0.0));
  // In float64 they are exact.
  wide.to(DType::float64);
  nn::load(only(c, {"i32"}), wide, nullptr, path);
  BOOST_CHECK(wide.values.to_vector() == c.tensors.at("i32").to_vector());
  BOOST_CHECK_EQUAL(wide.values.to_vector()[5], 16777217.0);

  // An optimizer buffer it has not made yet takes its parameter's float32; its step
  // count is read as float64.
  optim::Adam adam(model.named_parameters());
  nn::SafetensorsContents with_adam = only(c, {"bf16", "mask", "ids", "step"});
  const auto add = [&](const std::string& name, const Tensor& t, const std::string& dtype) {
    with_adam.tensors.emplace(name, t);
    with_adam.dtypes.emplace(name, dtype);
  };
  add("optimizer.lr", Tensor::scalar(1e-3, DType::float64), "F64");
  add("optimizer.step", Tensor::scalar(16777217.0, DType::float64), "I64");
  add("optimizer.state.bf16.step", Tensor::scalar(16777217.0, DType::float64), "I64");
  add("optimizer.state.bf16.exp_avg_sq", Tensor::zeros({12}), "F32");
  add("optimizer.state.bf16.exp_avg", Tensor::full({12}, 16777217.0, DType::float64), "I32");
  check_error([&] { nn::load(with_adam, model, &adam, path); },
              {path, "optimizer.state.bf16.exp_avg", "I32", "16777217", "float32"});
  with_adam.tensors["optimizer.state.bf16.exp_avg"] = Tensor::full({12}, 16777216.0, DType::float64);
  nn::load(with_adam, model, &adam, path);
  BOOST_CHECK_EQUAL(adam.step_count(), 16777217);
}

BOOST_AUTO_TEST_CASE(dtypes_sizes_and_inexact_integers_are_refused) {
  const fs::path path = scratch("dtypes.safetensors");
  const auto refused = [&](const std::string& header, const std::string& data,
                           std::initializer_list<std::string> parts) {
    write_bytes(path, safetensors_bytes(header, data));
    check_error([&] { nn::read_safetensors(path); }, parts);
    check_error([&] { nn::read_safetensors(path); }, {path.string()});
  };
  // The byte size follows each dtype's element size (1, 2, 4 or 8).
  refused(R"({"x":{"dtype":"I64","shape":[3],"data_offsets":[0,20]}})", std::string(20, '\0'),
          {"tensor 'x'", "do not hold 3 I64 values"});
  refused(R"({"x":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'), {"tensor 'x'", "3 BF16"});
  refused(R"({"x":{"dtype":"F16","shape":[2,2],"data_offsets":[0,4]}})", std::string(4, '\0'), {"4 F16"});
  refused(R"({"x":{"dtype":"BOOL","shape":[4],"data_offsets":[0,8]}})", std::string(8, '\0'), {"4 BOOL"});
  refused(R"({"x":{"dtype":"I32","shape":[2],"data_offsets":[0,16]}})", std::string(16, '\0'), {"2 I32"});
  refused(R"({"x":{"dtype":"U8","shape":[3],"data_offsets":[0,4]}})", std::string(4, '\0'), {"3 U8"});
  // Dtypes xgrad does not read: named, with the list of those it does.
  for (const std::string unknown : {"F8_E4M3", "F8_E5M2", "C64", "bool", "float32", ""})
    refused(R"({"x":{"dtype":")" + unknown + R"(","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'),
            {"tensor 'x'", "unsupported dtype \"" + unknown + "\"", "BF16", "I64"});
  // Integers no xgrad dtype holds exactly, and a BOOL byte that is no bool.
  refused(R"({"big":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})",
          raw_bytes<std::int64_t>({1, (std::int64_t{1} << 53) + 1}),
          {"tensor 'big'", "I64", "9007199254740993", "element 1", "float64"});
  refused(R"({"big":{"dtype":"U64","shape":[1],"data_offsets":[0,8]}})", raw_bytes<std::uint64_t>({~std::uint64_t{0}}),
          {"tensor 'big'", "U64", "18446744073709551615", "float64"});
  refused(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", raw_bytes<std::uint8_t>({0, 1, 2}),
          {"tensor 'm'", "BOOL", "2 at element 2", "neither 0 nor 1"});
  // At 2^53 exactly (and 2^53 + 2, a float64) the same dtype reads.
  write_bytes(path, safetensors_bytes(R"({"ok":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})",
                                      raw_bytes<std::int64_t>({std::int64_t{1} << 53, (std::int64_t{1} << 53) + 2})));
  BOOST_CHECK(nn::read_safetensors(path).tensors.at("ok").to_vector() == (std::vector<double>{0x1p53, 0x1p53 + 2}));
}

// xgrad writes its own dtypes, F32 and F64, whatever the file it read held.
BOOST_AUTO_TEST_CASE(what_was_read_is_written_as_f32_and_f64) {
  const nn::SafetensorsContents c = nn::read_safetensors(XGRAD_REFERENCE_DIR "/dtypes_written.safetensors");
  const std::string bytes = nn::encode_safetensors(c.tensors);
  const nn::SafetensorsContents back = nn::decode_safetensors(bytes);
  for (const auto& [name, dtype] : back.dtypes) {
    BOOST_CHECK_MESSAGE(dtype == "F32" || dtype == "F64", name << " written as " << dtype);
    BOOST_CHECK(back.tensors.at(name).dtype() == c.tensors.at(name).dtype());
  }
}
