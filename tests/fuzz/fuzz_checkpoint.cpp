// libFuzzer target for checkpoints. For any bytes:
//   - decoding either succeeds or raises an xgrad::Error (any other exception, crash or
//     memory error under AddressSanitizer is a bug);
//   - what decodes re-encodes to bytes that decode to the same tensors and metadata and
//     encode to the same bytes again (the writer's form is a fixed point);
//   - loading it into a model and an optimizer either succeeds or raises an Error and
//     leaves both exactly as they were.
// Build and run with `./run fuzz [SECONDS]`.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "xgrad/autograd/ops.hpp"
#include "xgrad/nn/checkpoint.hpp"
#include "xgrad/nn/nn.hpp"
#include "xgrad/optim/optim.hpp"

using namespace xgrad;

namespace {

void require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    std::abort();
  }
}

// Bitwise equality of two state dicts (NaN payloads included).
bool same_state(const StateDict& a, const StateDict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& entry : a) {
    const Tensor& t = entry.second;
    const auto it = b.find(entry.first);
    if (it == b.end() || it->second.shape() != t.shape() || it->second.dtype() != t.dtype()) return false;
    const bool equal = dispatch(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return t.numel() == 0 || std::memcmp(t.data<T>(), it->second.data<T>(), t.numel() * sizeof(T)) == 0;
    });
    if (!equal) return false;
  }
  return true;
}

StateDict snapshot(const Stateful& s) {
  StateDict copy;
  for (const auto& [name, t] : s.state_dict()) copy.emplace(name, t.clone());
  return copy;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nn::SafetensorsContents contents;
  try {
    contents = nn::decode_safetensors(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
  } catch (const Error&) {
    return 0;  // the expected way to reject a damaged file
  }
  // Round trip: decode(encode(x)) == x, and encoding is a fixed point.
  const std::string encoded = nn::encode_safetensors(contents.tensors, contents.metadata);
  const nn::SafetensorsContents again = nn::decode_safetensors(encoded, "re-encoded");
  require(same_state(contents.tensors, again.tensors), "decode(encode(x)) has other tensors");
  require(again.metadata == contents.metadata, "decode(encode(x)) has other metadata");
  require(nn::encode_safetensors(again.tensors, again.metadata) == encoded, "encoding is not a fixed point");

  // Loading: all or nothing. The model's names are the ones a corpus file may use.
  manual_seed(1);
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Linear>(2, 3));
  model.push_back(std::make_shared<nn::LayerNorm>(3));
  optim::Adam adam(model.named_parameters());
  sum(model(Tensor::ones({1, 2}))).backward();
  adam.step();
  const StateDict model_before = snapshot(model), adam_before = snapshot(adam);
  try {
    nn::load(contents, model, &adam, "fuzz input");
  } catch (const Error&) {
    require(same_state(snapshot(model), model_before), "a failed load changed the model");
    require(same_state(snapshot(adam), adam_before), "a failed load changed the optimizer");
  }
  return 0;
}
