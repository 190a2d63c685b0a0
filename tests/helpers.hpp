#pragma once
// Shared by the test suites: seeded inputs, gradient checks reported through Boost.Test,
// and checks that an error names what it should.

#include <unistd.h>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>
#include <system_error>

#include "xgrad/autograd/gradcheck.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/random.hpp"
#include "xgrad/nn/gradcheck.hpp"

namespace xgrad::test {

// N(0, 1) values in float64, a parameter unless requires_grad is false.
inline Tensor randn64(Shape shape, std::uint64_t seed, bool requires_grad = true) {
  Generator gen(seed);
  Tensor t = Tensor::randn(std::move(shape), gen, DType::float64);
  t.requires_grad_(requires_grad);
  return t;
}

inline Tensor uniform64(Shape shape, double low, double high, std::uint64_t seed, bool requires_grad = true) {
  Generator gen(seed);
  Tensor t = Tensor::uniform(std::move(shape), low, high, gen, DType::float64);
  t.requires_grad_(requires_grad);
  return t;
}

// A safetensors file: the header given as JSON text (padded to 8 bytes as the format
// asks), then the data region.
inline std::string safetensors_bytes(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  return bytes + header + data;
}

// Runs gradcheck with its default tolerances; a failure shows gradcheck's report.
inline void check_gradients(const TensorFunction& f, const std::vector<Tensor>& inputs) {
  try {
    BOOST_CHECK(gradcheck(f, inputs));
  } catch (const Error& e) {
    BOOST_ERROR(e.what());
  }
}

// nn::gradcheck of a module (parameters included), reported through Boost.Test.
inline void check_module_gradients(nn::Module& module, const std::function<Tensor(const std::vector<Tensor>&)>& forward,
                                   const std::vector<Tensor>& inputs) {
  try {
    BOOST_CHECK(nn::gradcheck(module, forward, inputs));
  } catch (const Error& e) {
    BOOST_ERROR(module.type_name() << ": " << e.what());
  }
}

// A 0/1 mask where each entry is 1 with probability keep_fraction.
inline Tensor random_keep(Shape shape, std::uint64_t seed, double keep_fraction, DType dtype = DType::float64) {
  Generator gen(seed);
  std::vector<double> values(numel(shape));
  for (double& x : values) x = gen.uniform() < keep_fraction;
  return Tensor::from_vector(values, std::move(shape), dtype);
}

inline void check_close(const std::vector<double>& actual, const std::vector<double>& expected,
                        double tolerance = 1e-12) {
  BOOST_REQUIRE_EQUAL(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i)
    BOOST_CHECK_MESSAGE(std::abs(actual[i] - expected[i]) <= tolerance * (1.0 + std::abs(expected[i])),
                        "element " << i << ": " << actual[i] << " vs expected " << expected[i]);
}

// The folders fresh_folder made under the temporary directory, removed with what they
// hold when the test program ends (after a failed test too).
struct TestFolders {
  std::set<std::filesystem::path> roots;
  TestFolders() = default;
  TestFolders(const TestFolders&) = delete;
  TestFolders& operator=(const TestFolders&) = delete;
  ~TestFolders() {
    std::error_code ignored;
    for (const std::filesystem::path& root : roots) std::filesystem::remove_all(root, ignored);
  }
};
inline TestFolders& test_folders() {
  static TestFolders folders;
  return folders;
}

// A fresh, empty folder for one test: <tmp>/xgrad-<suite>-<pid>/<name>, removed when the
// test program ends.
inline std::filesystem::path fresh_folder(const std::string& suite, const std::string& name) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("xgrad-" + suite + "-" + std::to_string(::getpid()));
  const std::filesystem::path folder = root / name;
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  test_folders().roots.insert(root);
  return folder;
}

// A file's bytes, read plainly (apart from xgrad's readers); a file written plainly.
inline std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}
inline void put_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// `f` must throw xgrad::Error whose message contains every one of `parts`.
template <class F>
void check_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    BOOST_ERROR("expected an xgrad::Error, nothing was thrown");
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      BOOST_CHECK_MESSAGE(message.find(part) != std::string::npos,
                          "message \"" << message << "\" lacks \"" << part << "\"");
  }
}

}  // namespace xgrad::test
