#define BOOST_TEST_MODULE gguf
// GGUF export (models/gguf.cpp, models/gguf_file.cpp): the container as ggml's
// docs/gguf.md defines it, read back here; the tensor encodings (F16 rounding, Q8_0's
// blocks) against their definitions; Llama's q/k rows reordered so that llama.cpp's RoPE
// of adjacent pairs turns what Hugging Face's RoPE of halves turns; the tokenizer's ids,
// types and merges; and the refusals. What llama.cpp makes of the files is gguf_export's
// (tests/gguf_export_test.sh).
#include <cmath>
#include <cstring>
#include <map>
#include <variant>

#include "helpers.hpp"
#include "small_models.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/models/detail/gguf_file.hpp"
#include "xgrad/models/models.hpp"
#include "xgrad/nn/lora.hpp"

using namespace xgrad;
using namespace xgrad::test;
namespace gguf = xgrad::models::gguf;

namespace {

// A file read back: its metadata (numbers as double, strings, arrays of strings or
// numbers) and its tensors' dims, types and bytes.
struct Parsed {
  std::map<std::string, std::variant<double, std::string, std::vector<std::string>, std::vector<double>>> meta;
  struct Tensor {
    std::vector<std::uint64_t> dims;
    std::uint32_t type = 0;
    std::uint64_t offset = 0;
    std::string bytes;
  };
  std::map<std::string, Tensor> tensors;
  std::vector<std::string> order;  // tensor names as written
  std::uint64_t data_start = 0;
};

class Reader {
 public:
  explicit Reader(std::string bytes) : bytes_(std::move(bytes)) {}
  template <typename T>
  T take() {
    BOOST_REQUIRE(at_ + sizeof(T) <= bytes_.size());
    T value;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string string() {
    const auto n = take<std::uint64_t>();
    BOOST_REQUIRE(at_ + n <= bytes_.size());
    std::string s = bytes_.substr(at_, n);
    at_ += n;
    return s;
  }
  double number(std::uint32_t type) {
    switch (type) {
      case 4:
        return take<std::uint32_t>();
      case 5:
        return take<std::int32_t>();
      case 6:
        return take<float>();
      case 7:
        return take<std::uint8_t>();
    }
    BOOST_FAIL("value type " << type);
    return 0;
  }
  std::uint64_t at() const { return at_; }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
  std::uint64_t at_ = 0;
};

Parsed parse(const std::string& path) {
  Reader in(file_bytes(path));
  BOOST_REQUIRE_EQUAL(in.bytes().substr(0, 4), "GGUF");
  in.take<std::uint32_t>();
  BOOST_REQUIRE_EQUAL(in.take<std::uint32_t>(), 3u);
  const auto tensors = in.take<std::uint64_t>(), keys = in.take<std::uint64_t>();
  Parsed parsed;
  for (std::uint64_t k = 0; k < keys; ++k) {
    const std::string key = in.string();
    const auto type = in.take<std::uint32_t>();
    if (type == 8) {
      parsed.meta[key] = in.string();
    } else if (type == 9) {
      const auto item = in.take<std::uint32_t>();
      const auto count = in.take<std::uint64_t>();
      if (item == 8) {
        std::vector<std::string> items;
        for (std::uint64_t i = 0; i < count; ++i) items.push_back(in.string());
        parsed.meta[key] = items;
      } else {
        std::vector<double> items;
        for (std::uint64_t i = 0; i < count; ++i) items.push_back(in.number(item));
        parsed.meta[key] = items;
      }
    } else {
      parsed.meta[key] = in.number(type);
    }
  }
  for (std::uint64_t t = 0; t < tensors; ++t) {
    const std::string name = in.string();
    Parsed::Tensor tensor;
    const auto dims = in.take<std::uint32_t>();
    for (std::uint32_t d = 0; d < dims; ++d) tensor.dims.push_back(in.take<std::uint64_t>());
    tensor.type = in.take<std::uint32_t>();
    tensor.offset = in.take<std::uint64_t>();
    BOOST_CHECK_EQUAL(tensor.offset % 32, 0u);
    parsed.tensors[name] = tensor;
    parsed.order.push_back(name);
  }
  parsed.data_start = (in.at() + 31) / 32 * 32;
  for (std::uint64_t i = in.at(); i < parsed.data_start; ++i) BOOST_CHECK_EQUAL(in.bytes()[i], '\0');
  const std::map<std::uint32_t, std::function<std::uint64_t(std::uint64_t)>> size_of = {
      {0, [](std::uint64_t n) { return 4 * n; }},
      {1, [](std::uint64_t n) { return 2 * n; }},
      {30, [](std::uint64_t n) { return 2 * n; }},
      {8, [](std::uint64_t n) { return n / 32 * 34; }}};
  for (auto& [name, tensor] : parsed.tensors) {
    std::uint64_t count = 1;
    for (const auto d : tensor.dims) count *= d;
    const std::uint64_t size = size_of.at(tensor.type)(count), start = parsed.data_start + tensor.offset;
    BOOST_REQUIRE_MESSAGE(start + size <= in.bytes().size(), name << " runs past the file's end");
    tensor.bytes = in.bytes().substr(start, size);
  }
  return parsed;
}

std::vector<float> f32_values(const Parsed::Tensor& tensor) {
  BOOST_REQUIRE_EQUAL(tensor.type, 0u);
  std::vector<float> values(tensor.bytes.size() / 4);
  std::memcpy(values.data(), tensor.bytes.data(), tensor.bytes.size());
  return values;
}

float half_to_float(std::uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

// A small byte-level BPE tokenizer: the 256 bytes, "th" and "the", then <|endoftext|>
// two ids on (a gap of one id).
text::Tokenizer small_tokenizer() {
  std::vector<std::string> ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace_back(1, static_cast<char>(b));
  ranks.push_back("th");
  ranks.push_back("the");
  return text::Tokenizer(ranks, {{"<|endoftext|>", 259}});
}

// The shared small models (small_models.hpp), with room for small_tokenizer()'s 260 ids.
models::LlamaConfig small_llama() {
  models::LlamaConfig c = test::small_llama(2, false);
  c.vocab_size = 262;
  return c;
}

models::GPT2Config small_gpt2() {
  models::GPT2Config c = test::small_gpt2(true);
  c.vocab_size = 260;
  return c;
}

std::string path_in(const std::string& name) { return (fresh_folder("test-gguf", name) / "model.gguf").string(); }

}  // namespace

BOOST_AUTO_TEST_CASE(f16_rounds_to_nearest_even) {
  BOOST_CHECK_EQUAL(gguf::to_half(1.0f), 0x3C00);
  BOOST_CHECK_EQUAL(gguf::to_half(-2.0f), 0xC000);
  BOOST_CHECK_EQUAL(gguf::to_half(65504.0f), 0x7BFF);                      // the largest half
  BOOST_CHECK_EQUAL(gguf::to_half(65520.0f), 0x7C00);                      // halfway past it: infinity
  BOOST_CHECK_EQUAL(gguf::to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // a tie: to the even neighbour
  BOOST_CHECK_EQUAL(gguf::to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  BOOST_CHECK_EQUAL(gguf::to_half(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
}

BOOST_AUTO_TEST_CASE(q8_0_blocks_hold_a_scale_and_32_codes) {
  Generator gen(3);
  std::vector<float> values(64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(gen.normal()) * (i < 32 ? 1 : 100);
  values[40] = 0;
  const std::string bytes = gguf::encode_tensor(gguf::TensorType::q8_0, values, 64);
  BOOST_REQUIRE_EQUAL(bytes.size(), 2u * 34);
  for (std::size_t block = 0; block < 2; ++block) {
    float largest = 0;
    for (std::size_t i = 0; i < 32; ++i) largest = std::max(largest, std::fabs(values[block * 32 + i]));
    std::uint16_t scale_bits;
    std::memcpy(&scale_bits, bytes.data() + block * 34, 2);
    BOOST_CHECK_EQUAL(scale_bits, gguf::to_half(largest / 127));
    const float scale = half_to_float(scale_bits);
    int widest = 0;
    for (std::size_t i = 0; i < 32; ++i) {
      const auto code = static_cast<std::int8_t>(bytes[block * 34 + 2 + i]);
      widest = std::max(widest, std::abs(static_cast<int>(code)));
      BOOST_CHECK_EQUAL(code, static_cast<std::int8_t>(std::round(values[block * 32 + i] / (largest / 127))));
      // Decoded with the rounded scale: within half a step, plus the scale's own rounding.
      BOOST_CHECK_LE(std::fabs(code * scale - values[block * 32 + i]),
                     0.5f * scale + 127 * std::fabs(scale - largest / 127));
    }
    BOOST_CHECK_EQUAL(widest, 127);
  }
  const std::vector<float> zeros(32, 0.0f);
  const std::string zero_block = gguf::encode_tensor(gguf::TensorType::q8_0, zeros, 32);
  BOOST_CHECK(zero_block == std::string(34, '\0'));  // scale 0, codes 0: no division by zero
  BOOST_CHECK_THROW(gguf::encode_tensor(gguf::TensorType::q8_0, std::vector<float>(48), 48), Error);
}

BOOST_AUTO_TEST_CASE(the_container_is_as_the_format_says) {
  gguf::File file;
  file.add("general.architecture", std::string("llama"));
  file.add("a.count", std::uint32_t{7});
  file.add("a.flag", true);
  file.add("a.names", std::vector<std::string>{"x", "yz"});
  file.add_tensor("first", {3, 1}, gguf::TensorType::f32, gguf::encode_tensor(gguf::TensorType::f32, {{1, 2, 3}}, 3));
  file.add_tensor("second", {5}, gguf::TensorType::f16,
                  gguf::encode_tensor(gguf::TensorType::f16, {{1, -1, 0.5, 2, 4}}, 5));
  const std::string path = path_in("container");
  AtomicFileWriter out(path, "test");
  file.write(out);
  out.commit();
  const Parsed parsed = parse(path);
  BOOST_CHECK(std::get<std::string>(parsed.meta.at("general.architecture")) == "llama");
  BOOST_CHECK_EQUAL(std::get<double>(parsed.meta.at("a.count")), 7);
  BOOST_CHECK_EQUAL(std::get<double>(parsed.meta.at("a.flag")), 1);
  BOOST_CHECK((std::get<std::vector<std::string>>(parsed.meta.at("a.names")) == std::vector<std::string>{"x", "yz"}));
  BOOST_CHECK((parsed.order == std::vector<std::string>{"first", "second"}));
  BOOST_CHECK_EQUAL(parsed.tensors.at("first").offset, 0u);
  BOOST_CHECK_EQUAL(parsed.tensors.at("second").offset, 32u);  // 12 bytes, padded to the alignment
  BOOST_CHECK((f32_values(parsed.tensors.at("first")) == std::vector<float>{1, 2, 3}));
  BOOST_CHECK_EQUAL(file_bytes(path).size(), parsed.data_start + 32 + 32);  // the last tensor padded too
}

// llama.cpp turns adjacent pairs (2i, 2i + 1) of each head by position * theta^(-2i / d);
// Hugging Face (and xgrad's rope) turns i and i + d/2 by the same angle. Rotating the
// exported rows as llama.cpp does must give Hugging Face's rotation of the model's rows,
// pair (2i, 2i + 1) holding what (i, i + d/2) held.
BOOST_AUTO_TEST_CASE(llama_q_and_k_rows_are_reordered_for_rope_on_pairs) {
  manual_seed(5);
  const models::LlamaConfig c = small_llama();
  const auto model = models::make_model(c);
  const std::string path = path_in("rope");
  models::save_gguf(*model, small_tokenizer(), path);
  const Parsed parsed = parse(path);
  const StateDict state = model->state_dict();
  const std::size_t d = c.head_width(), width = c.hidden_size, position = 7;
  Generator gen(11);
  const Tensor x = Tensor::randn({width}, gen);
  for (const auto& [ours, theirs, heads] :
       {std::tuple{"model.layers.1.self_attn.q_proj.weight", "blk.1.attn_q.weight", c.num_attention_heads},
        std::tuple{"model.layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight", c.kv_heads()}}) {
    const Tensor weight = state.at(ours);
    const std::size_t rows = weight.size(0);
    BOOST_REQUIRE((parsed.tensors.at(theirs).dims == std::vector<std::uint64_t>{width, rows}));
    const std::vector<float> exported = f32_values(parsed.tensors.at(theirs));
    // Hugging Face's side: the projection, turned by xgrad's rope at `position`.
    const Tensor projected = reshape(matmul(weight, reshape(x, {static_cast<std::int64_t>(width), 1})),
                                     {static_cast<std::int64_t>(heads), 1, static_cast<std::int64_t>(d)});
    const std::vector<double> hf = rope(projected, {.theta = c.rope_theta, .offset = position}).to_vector();
    const std::vector<double> xs = x.to_vector();
    for (std::size_t head = 0; head < heads; ++head)
      for (std::size_t i = 0; i < d / 2; ++i) {
        double a = 0, b = 0;  // rows 2i and 2i + 1 of the exported head, times x
        for (std::size_t col = 0; col < width; ++col) {
          a += exported[(head * d + 2 * i) * width + col] * xs[col];
          b += exported[(head * d + 2 * i + 1) * width + col] * xs[col];
        }
        const double angle = position * std::pow(c.rope_theta, -2.0 * i / d);
        const double turned_a = a * std::cos(angle) - b * std::sin(angle),
                     turned_b = b * std::cos(angle) + a * std::sin(angle);
        BOOST_CHECK_SMALL(turned_a - hf[head * d + i], 1e-4);
        BOOST_CHECK_SMALL(turned_b - hf[head * d + d / 2 + i], 1e-4);
      }
  }
  // v_proj, the output and the MLP are not turned: their rows stay as they are.
  BOOST_CHECK(f32_values(parsed.tensors.at("blk.0.attn_v.weight")) ==
              std::vector<float>(state.at("model.layers.0.self_attn.v_proj.weight").data<float>(),
                                 state.at("model.layers.0.self_attn.v_proj.weight").data<float>() + 8 * 16));
}

BOOST_AUTO_TEST_CASE(llama_metadata_tokens_and_types) {
  manual_seed(2);
  const models::LlamaConfig c = small_llama();
  const auto model = models::make_model(c);
  const std::string path = path_in("llama");
  models::save_gguf(*model, small_tokenizer(), path, {.tensor_type = models::GgufTensorType::q8_0});
  const Parsed parsed = parse(path);
  const auto number = [&](const std::string& key) { return std::get<double>(parsed.meta.at(key)); };
  BOOST_CHECK(std::get<std::string>(parsed.meta.at("general.architecture")) == "llama");
  BOOST_CHECK_EQUAL(number("llama.context_length"), 12);
  BOOST_CHECK_EQUAL(number("llama.embedding_length"), 16);
  BOOST_CHECK_EQUAL(number("llama.feed_forward_length"), 24);
  BOOST_CHECK_EQUAL(number("llama.attention.head_count"), 4);
  BOOST_CHECK_EQUAL(number("llama.attention.head_count_kv"), 2);
  BOOST_CHECK_EQUAL(number("llama.rope.freq_base"), 500);
  BOOST_CHECK_EQUAL(number("llama.rope.dimension_count"), 4);
  BOOST_CHECK_EQUAL(number("llama.attention.key_length"), 4);
  BOOST_CHECK_EQUAL(number("llama.attention.value_length"), 4);
  BOOST_CHECK_EQUAL(number("general.file_type"), 7);  // LLAMA_FTYPE_MOSTLY_Q8_0
  const auto tokens = std::get<std::vector<std::string>>(parsed.meta.at("tokenizer.ggml.tokens"));
  const auto types = std::get<std::vector<double>>(parsed.meta.at("tokenizer.ggml.token_type"));
  BOOST_REQUIRE_EQUAL(tokens.size(), 262u);  // the model's vocabulary: the tokenizer's 260 ids and 2 more
  BOOST_CHECK(tokens[32] == "\xC4\xA0");     // the space, in GPT-2's byte alphabet (U+0120)
  BOOST_CHECK(tokens[256] == "th" && tokens[257] == "the");
  BOOST_CHECK(tokens[259] == "<|endoftext|>");
  BOOST_CHECK((std::vector<double>(types.begin() + 256, types.end()) == std::vector<double>{1, 1, 5, 3, 5, 5}));
  BOOST_CHECK((std::get<std::vector<std::string>>(parsed.meta.at("tokenizer.ggml.merges")) ==
               std::vector<std::string>{"t h", "th e"}));
  BOOST_CHECK_EQUAL(number("tokenizer.ggml.eos_token_id"), 259);
  BOOST_CHECK_EQUAL(number("tokenizer.ggml.add_bos_token"), 0);
  // Q8_0 where rows are whole blocks; F16 where they are not (16 wide: half a block); norms F32.
  BOOST_CHECK_EQUAL(parsed.tensors.at("blk.0.ffn_down.weight").type, 1u);  // rows of 24
  BOOST_CHECK_EQUAL(parsed.tensors.at("blk.0.attn_q.weight").type, 1u);    // rows of 16
  BOOST_CHECK_EQUAL(parsed.tensors.at("blk.0.attn_norm.weight").type, 0u);
  BOOST_CHECK(parsed.tensors.contains("output.weight"));  // untied
  BOOST_CHECK_EQUAL(parsed.tensors.size(), 1 + 2 * 9 + 2u);
}

// llama.cpp stops generating at EOS, and takes id 11 for BOS and EOS when the file names
// none: an ordinary token (',' in GPT-2's vocabulary) would end every text.
BOOST_AUTO_TEST_CASE(bos_and_eos_are_never_an_ordinary_token) {
  std::vector<std::string> ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace_back(1, static_cast<char>(b));
  const auto bounds = [&](const std::vector<text::SpecialToken>& specials, std::size_t model_vocab) {
    models::LlamaConfig c = small_llama();
    c.vocab_size = model_vocab;
    const std::string path = path_in("bounds");
    models::save_gguf(*models::make_model(c), text::Tokenizer(ranks, specials), path, {.overwrite = true});
    const Parsed parsed = parse(path);
    return std::pair{std::get<double>(parsed.meta.at("tokenizer.ggml.bos_token_id")),
                     std::get<double>(parsed.meta.at("tokenizer.ggml.eos_token_id"))};
  };
  BOOST_CHECK((bounds({{"<pad>", 256}, {"<|endoftext|>", 257}}, 258) == std::pair{257.0, 257.0}));
  BOOST_CHECK((bounds({{"<s>", 256}, {"</s>", 257}, {"<unk>", 258}}, 259) == std::pair{256.0, 257.0}));
  BOOST_CHECK(
      (bounds({{"<|begin_of_text|>", 256}, {"<|eot_id|>", 258}, {"<x>", 257}}, 259) == std::pair{256.0, 258.0}));
  BOOST_CHECK((bounds({{"<|user|>", 256}}, 257) == std::pair{256.0, 256.0}));  // the only one
  // None that means the end: an id the tokenizer leaves unused (a gap, or past its end).
  BOOST_CHECK((bounds({}, 260) == std::pair{256.0, 256.0}));
  BOOST_CHECK((bounds({{"<a>", 256}, {"<b>", 258}}, 259) == std::pair{257.0, 257.0}));
  // No unused id either: refused, naming the special tokens and what llama.cpp would do.
  check_error(
      [&] {
        bounds({{"<a>", 256}, {"<b>", 257}}, 258);
      },
      {"save_gguf", "no end-of-text token (special tokens: <a>, <b>)", "id 11 (", "stop at each one"});
  check_error([&] { bounds({}, 256); }, {"save_gguf", "(special tokens: none)"});
}

// llama.cpp reads these fields as float32: a value it cannot hold is refused, not
// written as infinity (a rope_theta of 1e39 turned nothing in llama.cpp).
BOOST_AUTO_TEST_CASE(float_fields_past_float32_are_refused) {
  const auto refused = [](auto edit, const std::string& key) {
    models::LlamaConfig c = small_llama();
    edit(c);
    check_error([&] { models::save_gguf(*models::make_model(c), small_tokenizer(), path_in("float")); },
                {"save_gguf", key, "past GGUF's float32 field"});
    BOOST_CHECK(!std::filesystem::exists(path_in("float")));
  };
  refused([](models::LlamaConfig& c) { c.rope_theta = 1e39; }, "llama.rope.freq_base = 1e+39");
  refused(
      [](models::LlamaConfig& c) {
        c.rope_scaling.rope_type = "linear";
        c.rope_scaling.factor = 1e40;
      },
      "llama.rope.scaling.factor");
  // (The norms' epsilons are the model's own to refuse: a model is made only with ones
  // float32 holds.)
}

BOOST_AUTO_TEST_CASE(scaled_rope_and_head_dim_as_llama_cpp_reads_them) {
  // llama3: rope_freqs [head_dim / 2] in F32 whatever the type asked for, each pair's plain
  // frequency over its scaled one; no scaling keys. Head width 4, theta 500: pair 0 kept
  // (wavelength 2 pi < 200 / 4), pair 1 blended (about 140).
  models::LlamaConfig c = small_llama();
  c.rope_scaling = {.rope_type = "llama3", .factor = 4.0, .original_max_position_embeddings = 200};
  manual_seed(4);
  const std::string llama3 = path_in("llama3");
  models::save_gguf(*models::make_model(c), small_tokenizer(), llama3, {.tensor_type = models::GgufTensorType::bf16});
  const Parsed scaled = parse(llama3);
  BOOST_REQUIRE(scaled.tensors.contains("rope_freqs.weight"));
  const Parsed::Tensor& freqs = scaled.tensors.at("rope_freqs.weight");
  BOOST_CHECK_EQUAL(freqs.type, 0u);
  BOOST_CHECK((freqs.dims == std::vector<std::uint64_t>{2}));
  const std::vector<double> plain = rope_frequencies(500.0, 4), wanted = models::scaled_rope_frequencies(c);
  const std::vector<float> factors = f32_values(freqs);
  BOOST_CHECK_EQUAL(factors[0], 1.0f);
  BOOST_CHECK_EQUAL(factors[1], static_cast<float>(plain[1] / wanted[1]));
  BOOST_CHECK(factors[1] > 1.0f && factors[1] < 4.0f);
  BOOST_CHECK(!scaled.meta.contains("llama.rope.scaling.type"));
  // linear: llama.cpp's scaling keys, no tensor; plain: neither.
  c.rope_scaling = {.rope_type = "linear", .factor = 2.5};
  const std::string linear = path_in("linear");
  models::save_gguf(*models::make_model(c), small_tokenizer(), linear);
  const Parsed by_factor = parse(linear);
  BOOST_CHECK(std::get<std::string>(by_factor.meta.at("llama.rope.scaling.type")) == "linear");
  BOOST_CHECK_EQUAL(std::get<double>(by_factor.meta.at("llama.rope.scaling.factor")), 2.5);
  BOOST_CHECK(!by_factor.tensors.contains("rope_freqs.weight"));
  c.rope_scaling = {};
  // A head_dim of its own: key and value lengths say it, q's rows are heads x head_dim.
  c.hidden_size = 18, c.head_dim = 6;
  const std::string own_width = path_in("head-dim");
  models::save_gguf(*models::make_model(c), small_tokenizer(), own_width);
  const Parsed widths = parse(own_width);
  BOOST_CHECK_EQUAL(std::get<double>(widths.meta.at("llama.attention.key_length")), 6);
  BOOST_CHECK_EQUAL(std::get<double>(widths.meta.at("llama.attention.value_length")), 6);
  BOOST_CHECK_EQUAL(std::get<double>(widths.meta.at("llama.rope.dimension_count")), 6);
  BOOST_CHECK((widths.tensors.at("blk.0.attn_q.weight").dims == std::vector<std::uint64_t>{18, 24}));
  BOOST_CHECK((widths.tensors.at("blk.0.attn_output.weight").dims == std::vector<std::uint64_t>{24, 18}));
  c.hidden_size = 16, c.head_dim = 0;
  const std::string plain_path = path_in("plain-rope");
  models::save_gguf(*models::make_model(c), small_tokenizer(), plain_path);
  const Parsed unscaled = parse(plain_path);
  BOOST_CHECK(!unscaled.tensors.contains("rope_freqs.weight") && !unscaled.meta.contains("llama.rope.scaling.type"));
}

BOOST_AUTO_TEST_CASE(mistral_as_llama_with_its_window_for_context) {
  // llama.cpp's llama architecture has no sliding window: the file's context is the window
  // when it is shorter than the positions, and otherwise Llama's file.
  models::LlamaConfig c = small_llama();
  c.model_type = "mistral", c.sliding_window = 5;
  manual_seed(5);
  const std::string windowed = path_in("mistral");
  models::save_gguf(*models::make_model(c), small_tokenizer(), windowed);
  const Parsed mistral = parse(windowed);
  BOOST_CHECK(std::get<std::string>(mistral.meta.at("general.architecture")) == "llama");
  BOOST_CHECK_EQUAL(std::get<double>(mistral.meta.at("llama.context_length")), 5);
  c.sliding_window = 40;  // past the 12 positions
  const std::string wide = path_in("mistral-wide");
  models::save_gguf(*models::make_model(c), small_tokenizer(), wide);
  BOOST_CHECK_EQUAL(std::get<double>(parse(wide).meta.at("llama.context_length")), 12);
}

BOOST_AUTO_TEST_CASE(gpt2_names_layouts_and_tied_head) {
  manual_seed(4);
  models::GPT2Config c = small_gpt2();
  c.n_embd = 32, c.n_head = 4;  // rows of one Q8_0 block
  const auto model = models::make_model(c);
  const std::string path = path_in("gpt2");
  models::save_gguf(*model, small_tokenizer(), path, {.tensor_type = models::GgufTensorType::q8_0});
  const Parsed parsed = parse(path);
  BOOST_CHECK(!parsed.tensors.contains("output.weight"));  // tied: llama.cpp reuses token_embd
  const Parsed::Tensor& qkv = parsed.tensors.at("blk.1.attn_qkv.weight");
  BOOST_CHECK((qkv.dims == std::vector<std::uint64_t>{32, 96}));  // xgrad's Linear [out, in], ggml's {in, out}
  BOOST_CHECK_EQUAL(qkv.type, 8u);
  BOOST_CHECK_EQUAL(parsed.tensors.at("blk.1.attn_qkv.bias").type, 0u);
  // The first block of the first row decodes to the weight's first 32 values.
  const Tensor weight = model->state_dict().at("transformer.h.1.attn.c_attn.weight");
  std::uint16_t scale_bits;
  std::memcpy(&scale_bits, qkv.bytes.data(), 2);
  for (std::size_t i = 0; i < 32; ++i)
    BOOST_CHECK_SMALL(static_cast<std::int8_t>(qkv.bytes[2 + i]) * half_to_float(scale_bits) - weight.data<float>()[i],
                      0.51f * half_to_float(scale_bits) + 1e-6f);
  for (const char* name :
       {"token_embd.weight", "position_embd.weight", "output_norm.weight", "output_norm.bias", "blk.0.attn_norm.bias",
        "blk.0.ffn_norm.weight", "blk.0.attn_output.bias", "blk.0.ffn_up.bias", "blk.0.ffn_down.weight"})
    BOOST_CHECK_MESSAGE(parsed.tensors.contains(name), name);
  BOOST_CHECK_EQUAL(std::get<double>(parsed.meta.at("gpt2.attention.layer_norm_epsilon")), 1e-5f);
}

BOOST_AUTO_TEST_CASE(the_same_model_gives_the_same_bytes) {
  manual_seed(6);
  const auto model = models::make_model(small_gpt2());
  const std::string a = path_in("same-a"), b = path_in("same-b");
  models::save_gguf(*model, small_tokenizer(), a, {.tensor_type = models::GgufTensorType::bf16});
  models::save_gguf(*model, small_tokenizer(), b, {.tensor_type = models::GgufTensorType::bf16});
  BOOST_CHECK(file_bytes(a) == file_bytes(b));
}

BOOST_AUTO_TEST_CASE(refusals) {
  manual_seed(7);
  auto model = models::make_model(small_gpt2());
  const std::string path = path_in("refusals");
  models::save_gguf(*model, small_tokenizer(), path);
  const std::string before = file_bytes(path);
  check_error([&] { models::save_gguf(*model, small_tokenizer(), path, {.tensor_type = models::GgufTensorType::f16}); },
              {"save_gguf", "exists"});
  BOOST_CHECK(file_bytes(path) == before);
  models::save_gguf(*model, small_tokenizer(), path, {.tensor_type = models::GgufTensorType::f16, .overwrite = true});
  BOOST_CHECK(file_bytes(path) != before);

  models::GPT2Config relu = small_gpt2();
  relu.activation_function = "relu";
  check_error([&] { models::save_gguf(*models::make_model(relu), small_tokenizer(), path_in("relu")); },
              {"save_gguf", "gelu_new"});
  // gelu_pytorch_tanh is GELU's tanh form under another name: the same weights, the same file.
  models::GPT2Config tanh_named = small_gpt2();
  tanh_named.activation_function = "gelu_pytorch_tanh";
  const std::string gelu_new = path_in("gelu-new"), gelu_pytorch_tanh = path_in("gelu-pytorch-tanh");
  manual_seed(8);
  models::save_gguf(*models::make_model(small_gpt2()), small_tokenizer(), gelu_new);
  manual_seed(8);
  models::save_gguf(*models::make_model(tanh_named), small_tokenizer(), gelu_pytorch_tanh);
  BOOST_CHECK(file_bytes(gelu_new) == file_bytes(gelu_pytorch_tanh));
  models::GPT2Config narrow = small_gpt2();
  narrow.vocab_size = 259;  // one id short of the tokenizer's <|endoftext|>
  check_error([&] { models::save_gguf(*models::make_model(narrow), small_tokenizer(), path_in("narrow")); },
              {"save_gguf", "more than the model's vocabulary of 259"});
  check_error([&] { models::save_gguf(*model, small_tokenizer(), "/no/such/folder/m.gguf"); },
              {"save_gguf", "/no/such/folder"});
  nn::apply_lora(*model, {.r = 2, .target_modules = {"c_attn"}});
  check_error([&] { models::save_gguf(*model, small_tokenizer(), path_in("lora")); }, {"save_gguf", "LoRA"});
  BOOST_CHECK_THROW(models::parse_gguf_tensor_type("q4_0"), Error);
  BOOST_CHECK(models::parse_gguf_tensor_type("bf16") == models::GgufTensorType::bf16);
}
