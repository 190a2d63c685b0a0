#include "xgrad/models/gguf.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <span>
#include <sstream>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/models/detail/gguf_file.hpp"
#include "xgrad/text/byte_symbols.hpp"
#include "xgrad/text/vocabulary_files.hpp"

namespace xgrad::models {
namespace {

constexpr const char* kOp = "save_gguf";

// llama.cpp's names of a file's type (general.file_type: enum llama_ftype).
std::uint32_t llama_file_type(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::f32:
      return 0;  // LLAMA_FTYPE_ALL_F32
    case GgufTensorType::f16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case GgufTensorType::q8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case GgufTensorType::bf16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
  }
  return 0;
}

gguf::TensorType file_tensor_type(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::f32:
      return gguf::TensorType::f32;
    case GgufTensorType::f16:
      return gguf::TensorType::f16;
    case GgufTensorType::bf16:
      return gguf::TensorType::bf16;
    case GgufTensorType::q8_0:
      return gguf::TensorType::q8_0;
  }
  return gguf::TensorType::f32;
}

// A tensor's values as float32: its own (a float32 model's), or converted into `storage`.
std::span<const float> float_values(const Tensor& tensor, std::vector<float>& storage) {
  if (tensor.dtype() == DType::float32) return {tensor.data<float>(), tensor.numel()};
  const std::vector<double> values = tensor.to_vector();
  storage.assign(values.begin(), values.end());
  return storage;
}

// Hugging Face rotates the two halves of each head's columns, llama.cpp adjacent pairs:
// row i + h * half of a head (h = 0, 1) moves to row 2 i + h, in q_proj's and k_proj's
// rows, so that llama.cpp's rotation of pairs turns the same values together.
std::vector<float> pairs_from_halves(std::span<const float> weight, std::size_t heads, std::size_t row_length) {
  const std::size_t head_rows = weight.size() / row_length / heads, half = head_rows / 2;
  std::vector<float> out(weight.size());
  for (std::size_t head = 0; head < heads; ++head)
    for (std::size_t i = 0; i < half; ++i)
      for (std::size_t h = 0; h < 2; ++h) {
        const auto from = weight.begin() + static_cast<std::ptrdiff_t>((head * head_rows + h * half + i) * row_length);
        std::copy(from, from + static_cast<std::ptrdiff_t>(row_length),
                  out.begin() + static_cast<std::ptrdiff_t>((head * head_rows + 2 * i + h) * row_length));
      }
  return out;
}

// Each block's tensors: llama.cpp's name after "blk.N.", Hugging Face's after the block's
// prefix, and how each is stored.
enum class Stored { vector, matrix, rope_query, rope_key };
struct BlockTensor {
  const char* to;
  const char* from;
  Stored stored;
};

constexpr BlockTensor kGpt2Block[] = {
    {"attn_norm.weight", "ln_1.weight", Stored::vector},
    {"attn_norm.bias", "ln_1.bias", Stored::vector},
    {"attn_qkv.weight", "attn.c_attn.weight", Stored::matrix},
    {"attn_qkv.bias", "attn.c_attn.bias", Stored::vector},
    {"attn_output.weight", "attn.c_proj.weight", Stored::matrix},
    {"attn_output.bias", "attn.c_proj.bias", Stored::vector},
    {"ffn_norm.weight", "ln_2.weight", Stored::vector},
    {"ffn_norm.bias", "ln_2.bias", Stored::vector},
    {"ffn_up.weight", "mlp.c_fc.weight", Stored::matrix},
    {"ffn_up.bias", "mlp.c_fc.bias", Stored::vector},
    {"ffn_down.weight", "mlp.c_proj.weight", Stored::matrix},
    {"ffn_down.bias", "mlp.c_proj.bias", Stored::vector},
};

constexpr BlockTensor kLlamaBlock[] = {
    {"attn_norm.weight", "input_layernorm.weight", Stored::vector},
    {"attn_q.weight", "self_attn.q_proj.weight", Stored::rope_query},
    {"attn_k.weight", "self_attn.k_proj.weight", Stored::rope_key},
    {"attn_v.weight", "self_attn.v_proj.weight", Stored::matrix},
    {"attn_output.weight", "self_attn.o_proj.weight", Stored::matrix},
    {"ffn_norm.weight", "post_attention_layernorm.weight", Stored::vector},
    {"ffn_gate.weight", "mlp.gate_proj.weight", Stored::matrix},
    {"ffn_up.weight", "mlp.up_proj.weight", Stored::matrix},
    {"ffn_down.weight", "mlp.down_proj.weight", Stored::matrix},
};

// The model's tensors into the file under llama.cpp's names: each named as it comes, all
// encoded at the end on the pool (a GPT-2 124M's 124M values), added in the order named.
class TensorWriter {
 public:
  TensorWriter(const StateDict& tensors, GgufTensorType type) : tensors_(tensors), type_(type) {}

  // A vector (a norm's gain, a bias): always F32, as llama.cpp's converter keeps them.
  void vector(const std::string& name, const std::string& from) {
    const Tensor& tensor = get(from);
    pending_.push_back({name, {tensor.numel()}, gguf::TensorType::f32, &tensor, 0});
  }
  // A matrix [rows, row_length] as xgrad stores it (a Linear's [out, in], an embedding's
  // [tokens, width]): ggml's dimensions are {row_length, rows}. Under Q8_0, rows that are
  // not whole blocks are stored in F16 (as llama.cpp's quantizer falls back). rope_heads:
  // q_proj's or k_proj's heads, whose rows are reordered (pairs_from_halves).
  void matrix(const std::string& name, const std::string& from, std::size_t rope_heads = 0) {
    const Tensor& tensor = get(from);
    const std::size_t rows = tensor.size(0), row_length = tensor.size(1);
    gguf::TensorType type = file_tensor_type(type_);
    if (type == gguf::TensorType::q8_0 && row_length % gguf::kQ8Block != 0) type = gguf::TensorType::f16;
    pending_.push_back({name, {row_length, rows}, type, &tensor, rope_heads});
  }

  // Every block's tensors, as the table says. heads: the query and K/V heads whose rows
  // RoPE turns (Llama).
  struct RopeHeads {
    std::size_t query = 0, key = 0;
  };
  template <std::size_t N>
  void blocks(std::size_t count, const std::string& prefix, const BlockTensor (&table)[N], RopeHeads heads = {}) {
    for (std::size_t layer = 0; layer < count; ++layer) {
      const std::string to = "blk." + std::to_string(layer) + ".", from = prefix + std::to_string(layer) + ".";
      for (const BlockTensor& t : table) {
        if (t.stored == Stored::vector)
          vector(to + t.to, from + t.from);
        else
          matrix(to + t.to, from + t.from,
                 t.stored == Stored::rope_query ? heads.query
                 : t.stored == Stored::rope_key ? heads.key
                                                : 0);
      }
    }
  }

  void add_to(gguf::File& file) {
    std::vector<std::string> data(pending_.size());
    parallel_for(pending_.size(), 1e5, [&](std::size_t i) { data[i] = encode(pending_[i]); });
    for (std::size_t i = 0; i < pending_.size(); ++i)
      file.add_tensor(pending_[i].name, pending_[i].dims, pending_[i].type, std::move(data[i]));
  }

 private:
  struct Pending {
    std::string name;
    std::vector<std::uint64_t> dims;
    gguf::TensorType type;
    const Tensor* tensor;
    std::size_t rope_heads;
  };
  static std::string encode(const Pending& p) {
    std::vector<float> converted, reordered;
    std::span<const float> values = float_values(*p.tensor, converted);
    if (p.rope_heads) values = reordered = pairs_from_halves(values, p.rope_heads, p.dims[0]);
    return gguf::encode_tensor(p.type, values, p.dims[0]);
  }
  const Tensor& get(const std::string& name) const {
    const auto found = tensors_.find(name);
    XGRAD_CHECK(found != tensors_.end(), kOp, "the model has no tensor ", name);
    return found->second;
  }
  const StateDict& tensors_;
  GgufTensorType type_;
  std::vector<Pending> pending_;
};

// A float32 field (llama.cpp reads them so): a value float32 cannot hold (1e39 is
// infinite, 1e-50 zero) is refused rather than written as another.
void add_float(gguf::File& file, const std::string& key, double value) {
  const auto held = static_cast<float>(value);
  XGRAD_CHECK(std::isfinite(held) && (held != 0 || value == 0), kOp, key, " = ", value,
              " is past GGUF's float32 field (it would read ", held, ")");
  file.add(key, held);
}

// general.architecture, then "<architecture>.<key>" for each of the sizes (u32, as
// llama.cpp reads them).
void add_sizes(gguf::File& file, const std::string& architecture,
               std::initializer_list<std::pair<const char*, std::size_t>> sizes) {
  file.add("general.architecture", architecture);
  for (const auto& [key, size] : sizes) {
    XGRAD_CHECK(size <= UINT32_MAX, kOp, architecture, ".", key, " = ", size, " is past GGUF's 32-bit field");
    file.add(architecture + "." + key, static_cast<std::uint32_t>(size));
  }
}

void add_gpt2(gguf::File& file, TensorWriter& write, const GPT2Config& c) {
  XGRAD_CHECK(c.activation_function == "gelu_new" || c.activation_function == "gelu_pytorch_tanh", kOp,
              "llama.cpp's gpt2 runs GELU's tanh form (gelu_new, gelu_pytorch_tanh) only, not ", c.activation_function,
              " (config.json's activation_function)");
  add_sizes(file, "gpt2",
            {{"context_length", c.n_positions},
             {"embedding_length", c.n_embd},
             {"feed_forward_length", c.inner()},
             {"block_count", c.n_layer},
             {"attention.head_count", c.n_head}});
  add_float(file, "gpt2.attention.layer_norm_epsilon", c.layer_norm_epsilon);

  write.matrix("token_embd.weight", "transformer.wte.weight");
  write.matrix("position_embd.weight", "transformer.wpe.weight");
  write.blocks(c.n_layer, "transformer.h.", kGpt2Block);
  write.vector("output_norm.weight", "transformer.ln_f.weight");
  write.vector("output_norm.bias", "transformer.ln_f.bias");
  if (!c.tie_word_embeddings) write.matrix("output.weight", "lm_head.weight");  // else llama.cpp reuses token_embd
}

// rope_scaling in the keys llama.cpp's converter writes: linear as a factor (llama.cpp
// turns by 1 / factor), llama3 as rope_freqs, each pair's plain frequency over its scaled
// one (llama.cpp divides the plain angle by it), F32. The ratios come from the model's own
// frequencies, so original_max_position_embeddings is the one transformers reads.
void add_rope_scaling(gguf::File& file, const LlamaConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  if (s.rope_type == "linear") {
    file.add("llama.rope.scaling.type", std::string("linear"));
    add_float(file, "llama.rope.scaling.factor", s.factor);
  } else if (s.rope_type == "llama3") {
    const std::vector<double> plain = rope_frequencies(c.rope_theta, c.head_width()),
                              scaled = scaled_rope_frequencies(c);
    std::vector<float> factors(plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) factors[i] = static_cast<float>(plain[i] / scaled[i]);
    file.add_tensor("rope_freqs.weight", {factors.size()}, gguf::TensorType::f32,
                    gguf::encode_tensor(gguf::TensorType::f32, factors, factors.size()));
  }
}

// Mistral's files are written as llama.cpp's own converter writes them, as the "llama"
// architecture; it has no sliding window, so a window shorter than the positions is
// the file's context: within it, every query sees every key Mistral's does.
void add_llama(gguf::File& file, TensorWriter& write, const LlamaConfig& c) {
  const std::size_t context =
      c.sliding_window ? std::min(c.sliding_window, c.max_position_embeddings) : c.max_position_embeddings;
  add_sizes(file, "llama",
            {{"context_length", context},
             {"embedding_length", c.hidden_size},
             {"feed_forward_length", c.intermediate_size},
             {"block_count", c.num_hidden_layers},
             {"attention.head_count", c.num_attention_heads},
             {"attention.head_count_kv", c.kv_heads()},
             {"attention.key_length", c.head_width()},
             {"attention.value_length", c.head_width()},
             {"rope.dimension_count", c.head_width()},
             {"vocab_size", c.vocab_size}});
  add_float(file, "llama.attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  add_float(file, "llama.rope.freq_base", c.rope_theta);
  add_rope_scaling(file, c);

  write.matrix("token_embd.weight", "model.embed_tokens.weight");
  write.blocks(c.num_hidden_layers, "model.layers.", kLlamaBlock, {c.num_attention_heads, c.kv_heads()});
  write.vector("output_norm.weight", "model.norm.weight");
  if (!c.tie_word_embeddings) write.matrix("output.weight", "lm_head.weight");
}

// The ids of llama.cpp's BOS and EOS (generation stops at EOS). Without them in the file
// llama.cpp takes id 11 for both, an ordinary token in a byte-level vocabulary (',' in
// GPT-2's): every comma would end a text. So: the special tokens that mean them
// (text::text_bounds), else an id the tokenizer leaves unused (nothing the model writes
// then ends a text, as nothing in its tokenizer does), else refused.
std::pair<text::TokenId, text::TokenId> text_bounds(const text::Tokenizer& tokenizer, std::size_t model_vocab) {
  if (const auto named = text::text_bounds(tokenizer)) return {named->beginning, named->end};
  const auto& specials = tokenizer.special_tokens();
  for (std::size_t id = tokenizer.rank_count(); id < model_vocab; ++id)
    if (std::none_of(specials.begin(), specials.end(), [&](const auto& s) { return s.id == id; }))
      return {static_cast<text::TokenId>(id), static_cast<text::TokenId>(id)};
  std::string names;
  for (const text::SpecialToken& special : specials) names += (names.empty() ? "" : ", ") + special.text;
  fail(kOp, "the tokenizer has no end-of-text token (special tokens: ", names.empty() ? "none" : names,
       ") and the model no unused id to stand for one: llama.cpp would take id 11 (",
       tokenizer.rank_count() > 11 ? text::bytes_to_symbols(tokenizer.token_bytes(11)) : "a special token",
       ") as the beginning and end of every text and stop at each one; a tokenizer with <|endoftext|> ",
       "(xgrad-tokenize's) gives one");
}

// The tokenizer as llama.cpp's "gpt2" model (byte-level BPE) reads it: every id's token
// (ordinary ones in GPT-2's byte alphabet, special ones as their text), its type, and the
// merges in rank order ("Ġ t"). Ids the tokenizer leaves free below the model's vocabulary
// (gaps among special ids, rows past the tokenizer's end) are unused tokens.
void add_tokenizer(gguf::File& file, const text::Tokenizer& tokenizer, std::size_t model_vocab) {
  XGRAD_CHECK(tokenizer.vocabulary_size() <= model_vocab, kOp, "the tokenizer has ", tokenizer.vocabulary_size(),
              " ids, more than the model's vocabulary of ", model_vocab);
  constexpr std::int32_t kNormal = 1, kControl = 3, kUnused = 5;  // llama_token_type
  std::vector<std::string> tokens(model_vocab);
  std::vector<std::int32_t> types(model_vocab, kUnused);
  for (std::size_t id = 0; id < model_vocab; ++id) tokens[id] = "[PAD" + std::to_string(id) + "]";
  for (text::TokenId id = 0; id < tokenizer.rank_count(); ++id) {
    tokens[id] = text::bytes_to_symbols(tokenizer.token_bytes(id));
    types[id] = kNormal;
  }
  for (const text::SpecialToken& special : tokenizer.special_tokens()) {
    tokens[special.id] = special.text;
    types[special.id] = kControl;
  }
  // vocab.bpe's lines after its header are the merges, rank 256 on.
  std::vector<std::string> merges;
  std::istringstream lines(text::format_gpt2_vocabulary(tokenizer).vocab_bpe);
  std::string line;
  std::getline(lines, line);  // "#version: 0.2"
  while (std::getline(lines, line)) merges.push_back(line);

  file.add("tokenizer.ggml.model", std::string("gpt2"));
  file.add("tokenizer.ggml.pre", std::string("gpt-2"));
  file.add("tokenizer.ggml.tokens", std::move(tokens));
  file.add("tokenizer.ggml.token_type", std::move(types));
  file.add("tokenizer.ggml.merges", std::move(merges));
  const auto [beginning, end] = text_bounds(tokenizer, model_vocab);
  file.add("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(beginning));
  file.add("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(end));
  file.add("tokenizer.ggml.add_bos_token", false);  // GPT-2's encoding adds nothing
  file.add("tokenizer.ggml.add_eos_token", false);
}

}  // namespace

std::string_view gguf_tensor_type_name(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::f32:
      return "f32";
    case GgufTensorType::f16:
      return "f16";
    case GgufTensorType::bf16:
      return "bf16";
    case GgufTensorType::q8_0:
      return "q8_0";
  }
  return "?";
}

GgufTensorType parse_gguf_tensor_type(std::string_view name) {
  for (const GgufTensorType type :
       {GgufTensorType::f32, GgufTensorType::f16, GgufTensorType::bf16, GgufTensorType::q8_0})
    if (name == gguf_tensor_type_name(type)) return type;
  throw Error(str("gguf: no tensor type '", name, "' (f32, f16, bf16 or q8_0)"));
}

void save_gguf(const PretrainedModel& model, const text::Tokenizer& tokenizer, const std::string& path,
               const GgufOptions& options) {
  XGRAD_CHECK(options.overwrite || !std::filesystem::exists(path), kOp, "'", path,
              "' exists (asked to replace it: overwrite)");
  const StateDict tensors = model.state_dict();
  for (const auto& named : tensors)
    XGRAD_CHECK(named.first.find(".lora_") == std::string::npos, kOp, "the model has LoRA adapters (", named.first,
                "): merge them first (nn::merge_lora)");
  gguf::File file;
  TensorWriter write(tensors, options.tensor_type);
  const ModelConfig config = model.config();
  const std::size_t text_bytes = std::visit([](const auto& c) { return c.token_ids.text_bytes.size(); }, config);
  XGRAD_CHECK(text_bytes == 0, kOp, "a model of a text's bytes (its ids are the text's ", text_bytes,
              " distinct bytes, in order, as its config's xgrad_text_bytes says) takes no tokenizer's ids");
  if (const auto* gpt2 = std::get_if<GPT2Config>(&config))
    add_gpt2(file, write, *gpt2);
  else
    add_llama(file, write, std::get<LlamaConfig>(config));
  write.add_to(file);
  file.add("general.file_type", llama_file_type(options.tensor_type));
  file.add("general.quantization_version", std::uint32_t{2});  // ggml's GGML_QNT_VERSION
  add_tokenizer(file, tokenizer, model.vocab_size());
  AtomicFileWriter out(path, kOp);
  file.write(out);
  out.commit();
}

}  // namespace xgrad::models
