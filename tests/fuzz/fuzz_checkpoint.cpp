// libFuzzer target for the checkpoint loader: any bytes must either decode or raise an
// xgrad::Error; any other exception, crash or memory error (AddressSanitizer) is a bug.
// Build and run with `./run fuzz [SECONDS]`.

#include <cstdint>
#include <string>

#include "nn/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const xgrad::nn::SafetensorsContents contents =
        xgrad::nn::decode_safetensors(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
    // Whatever decoded must be usable: read every value back.
    for (const auto& [name, tensor] : contents.tensors) (void)tensor.to_vector();
  } catch (const xgrad::Error&) {
    // The expected way to reject a damaged file.
  }
  return 0;
}
