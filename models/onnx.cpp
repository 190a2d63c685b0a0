#include "xgrad/models/onnx.hpp"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h (ONNX_ML)
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/version.hpp"
#include "xgrad/models/config.hpp"

namespace xgrad::models {

namespace {

constexpr const char* kOp = "save_onnx";
constexpr std::int64_t kIrVersion = 8;
constexpr std::int64_t kOpset = 17;
// raw_data is little-endian by the spec; the weights are copied as they lie in memory.
static_assert(std::endian::native == std::endian::little, "save_onnx writes raw_data as the machine lays it out");

using Names = std::vector<std::string>;
using Ints = std::vector<std::int64_t>;

onnx::AttributeProto attribute(const std::string& name, std::int64_t value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
  return a;
}

onnx::AttributeProto attribute(const std::string& name, float value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(value);
  return a;
}

onnx::AttributeProto attribute(const std::string& name, const Ints& values) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (std::int64_t v : values) a.add_ints(v);
  return a;
}

using Attributes = std::vector<onnx::AttributeProto>;

// Builds a GraphProto node by node, naming every value: the model code reads as the
// forward pass, each call one op.
class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto& graph) : graph_(graph) {}

  // Values made from here on are named "<scope>/<op>_<n>" (scope e.g. "transformer.h.0.attn").
  void set_scope(std::string scope) { scope_ = std::move(scope); }

  // One node of `type` with `outputs` outputs; returns their names (`output` names the
  // first when given: the graph's output).
  Names node(const std::string& type, const Names& inputs, std::size_t outputs, const Attributes& attributes = {},
             const std::string& output = "") {
    onnx::NodeProto& n = *graph_.add_node();
    n.set_op_type(type);
    for (const std::string& input : inputs) n.add_input(input);
    Names names;
    for (std::size_t i = 0; i < outputs; ++i) names.push_back(i == 0 && !output.empty() ? output : fresh(type));
    for (const std::string& name : names) n.add_output(name);
    n.set_name(names[0]);
    for (const onnx::AttributeProto& a : attributes) *n.add_attribute() = a;
    return names;
  }
  std::string op(const std::string& type, const Names& inputs, const Attributes& attributes = {},
                 const std::string& output = "") {
    return node(type, inputs, 1, attributes, output)[0];
  }

  // A float32 initializer of `dims`: returns its raw_data, sized, for the caller to fill.
  char* initializer(const std::string& name, const Ints& dims) {
    onnx::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    std::size_t count = 1;
    for (std::int64_t d : dims) {
      t.add_dims(d);
      count *= static_cast<std::size_t>(d);
    }
    t.mutable_raw_data()->resize(count * sizeof(float));
    return t.mutable_raw_data()->data();
  }
  std::string initializer(const std::string& name, const std::vector<float>& values, const Ints& dims) {
    std::memcpy(initializer(name, dims), values.data(), values.size() * sizeof(float));
    return name;
  }

  // Small constants (shapes, axes, scalars) as Constant nodes, each made once: the
  // initializers stay the weights alone.
  std::string ints(const Ints& values) { return constant(values, {static_cast<std::int64_t>(values.size())}); }
  std::string int_scalar(std::int64_t value) { return constant(Ints{value}, {}); }
  std::string scalar(float value) { return constant(std::vector<float>{value}, {}); }

 private:
  std::string fresh(const std::string& type) {
    return (scope_.empty() ? "" : scope_ + "/") + type + "_" + std::to_string(count_++);
  }

  template <class T>
  std::string constant(const std::vector<T>& values, const Ints& dims) {
    constexpr bool is_float = std::is_same_v<T, float>;
    std::string key(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
    key += is_float ? "f" : "i";
    key += std::to_string(dims.size());
    if (auto it = constants_.find(key); it != constants_.end()) return it->second;
    onnx::AttributeProto value;
    value.set_name("value");
    value.set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto& t = *value.mutable_t();
    t.set_data_type(is_float ? onnx::TensorProto::FLOAT : onnx::TensorProto::INT64);
    for (std::int64_t d : dims) t.add_dims(d);
    t.set_raw_data(values.data(), values.size() * sizeof(T));
    onnx::NodeProto& n = *graph_.add_node();
    n.set_op_type("Constant");
    const std::string name = "const_" + std::to_string(constants_.size());
    n.set_name(name);
    n.add_output(name);
    *n.add_attribute() = value;
    return constants_[key] = name;
  }

  onnx::GraphProto& graph_;
  std::string scope_;
  std::size_t count_ = 0;
  std::map<std::string, std::string> constants_;
};

// The values every block shares, computed once from input_ids.
struct Inputs {
  std::string ids;          // [B, T] int64
  std::string positions;    // [T] int64: 0 ... T - 1
  std::string causal_bias;  // [T, T] float: -inf where the key comes after the query, else 0
  std::string ids_shape;    // [2] int64: B, T
};

// The forward pass of one model into a graph: its weights as initializers (each once), its
// blocks as nodes.
class Exporter {
 public:
  Exporter(const PretrainedModel& model, onnx::GraphProto& graph) : g_(graph), state_(model.state_dict()) {}

  GraphBuilder& g() { return g_; }

  std::string weight(const std::string& name, bool transpose = false) {
    if (!stored_.insert(name).second) return name;  // tied: the one initializer again
    const auto found = state_.find(name);
    XGRAD_CHECK(found != state_.end(), kOp, "the model has no tensor '", name, "'");
    // float32 as stored (float64 and bfloat16 models converted), [rows, cols] row-major.
    const Tensor t =
        found->second.dtype() == DType::float32 ? found->second : found->second.detach().to(DType::float32);
    const Shape shape = t.shape();
    const float* values = t.data<float>();
    Ints dims(shape.begin(), shape.end());
    if (!transpose) {
      std::memcpy(g_.initializer(name, dims), values, t.numel() * sizeof(float));
      return name;
    }
    // A Linear's [out, in] weight stored [in, out], as MatMul reads it: transposed here
    // once rather than by a Transpose node at every run.
    XGRAD_CHECK(shape.size() == 2, kOp, "'", name, "' is ", shape, ", not a matrix");
    const std::size_t rows = shape[0], cols = shape[1];
    char* data = g_.initializer(name, {dims[1], dims[0]});
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c)
        std::memcpy(data + (c * rows + r) * sizeof(float), values + r * cols + c, sizeof(float));
    return name;
  }

  // y = x W^T (+ b) for the Linear `name`: W stored as [in, out].
  std::string linear(const std::string& x, const std::string& name, bool bias) {
    const std::string y = g_.op("MatMul", {x, weight(name + ".weight", /*transpose=*/true)});
    return bias ? g_.op("Add", {y, weight(name + ".bias")}) : y;
  }

  // `window`: Mistral's sliding window (0: none).
  Inputs inputs(const std::string& ids, std::size_t window = 0) {
    g_.set_scope("inputs");
    Inputs in;
    in.ids = ids;
    in.ids_shape = g_.op("Shape", {ids});
    const std::string length = g_.op("Gather", {in.ids_shape, g_.int_scalar(1)});  // T, a scalar
    in.positions = g_.op("Range", {g_.int_scalar(0), length, g_.int_scalar(1)});
    // Key j is hidden from query i when j > i: built from the positions, so it fits any T.
    const std::string keys = g_.op("Unsqueeze", {in.positions, g_.ints({0})});     // [1, T]
    const std::string queries = g_.op("Unsqueeze", {in.positions, g_.ints({1})});  // [T, 1]
    std::string hidden = g_.op("Greater", {keys, queries});
    if (window > 0) {  // and when i - j >= window
      const std::string behind = g_.op("Sub", {queries, keys});
      const std::string outside = g_.op("Greater", {behind, g_.int_scalar(static_cast<std::int64_t>(window) - 1)});
      hidden = g_.op("Or", {hidden, outside});
    }
    in.causal_bias = g_.op("Where", {hidden, g_.scalar(-std::numeric_limits<float>::infinity()), g_.scalar(0.0f)});
    return in;
  }

  // The output head: logits = h W^T with W the head's [vocab, width] weight.
  void head(const std::string& h, const std::string& embedding, bool tied, const Inputs& in) {
    g_.set_scope("lm_head");
    if (!tied) {
      g_.op("MatMul", {h, weight("lm_head.weight", /*transpose=*/true)}, {}, "logits");
      return;
    }
    // Tied: the embedding's own initializer, read transposed by Gemm (transB), which takes
    // matrices: the rows flattened, then reshaped back to [B, T, vocab].
    const std::string rows = g_.op("Reshape", {h, g_.ints({-1, width_of(embedding)})});
    const std::string flat = g_.op("Gemm", {rows, weight(embedding)}, {attribute("transB", std::int64_t{1})});
    const std::string shape = g_.op("Concat", {in.ids_shape, g_.ints({-1})}, {attribute("axis", std::int64_t{0})});
    g_.op("Reshape", {flat, shape}, {}, "logits");
  }

  // softmax(q k^T * scale + causal) v over heads; q [B, T, heads * D], k and v
  // [B, T, kv_heads * D]; returns [B, T, heads * D]. Query head h = kv * group + i reads
  // K/V head kv: q is viewed as [B, kv_heads, group, T, D] and k as
  // [B, kv_heads, 1, D, T], so MatMul broadcasts each K/V head over its group, no copy.
  // `rotate` (RoPE) applies to q and k in the [B, T, kv_heads, group or 1, D] view.
  template <class Rotate>
  std::string attention(const std::string& q, const std::string& k, const std::string& v, std::int64_t heads,
                        std::int64_t kv_heads, std::int64_t head_dim, const Inputs& in, Rotate rotate) {
    const std::int64_t group = heads / kv_heads;
    const std::string q5 = rotate(g_.op("Reshape", {q, g_.ints({0, 0, kv_heads, group, head_dim})}));
    const std::string k5 = rotate(g_.op("Reshape", {k, g_.ints({0, 0, kv_heads, 1, head_dim})}));
    const std::string v5 = g_.op("Reshape", {v, g_.ints({0, 0, kv_heads, 1, head_dim})});
    const std::string qh = g_.op("Transpose", {q5}, {attribute("perm", Ints{0, 2, 3, 1, 4})});  // [B, KV, G, T, D]
    const std::string kt = g_.op("Transpose", {k5}, {attribute("perm", Ints{0, 2, 3, 4, 1})});  // [B, KV, 1, D, T]
    const std::string vh = g_.op("Transpose", {v5}, {attribute("perm", Ints{0, 2, 3, 1, 4})});  // [B, KV, 1, T, D]
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    const std::string scores = g_.op("Mul", {g_.op("MatMul", {qh, kt}), g_.scalar(scale)});
    const std::string probs =
        g_.op("Softmax", {g_.op("Add", {scores, in.causal_bias})}, {attribute("axis", std::int64_t{-1})});
    const std::string out = g_.op("MatMul", {probs, vh});                                            // [B, KV, G, T, D]
    const std::string merged = g_.op("Transpose", {out}, {attribute("perm", Ints{0, 3, 1, 2, 4})});  // [B, T, KV, G, D]
    return g_.op("Reshape", {merged, g_.ints({0, 0, -1})});
  }

 private:
  std::int64_t width_of(const std::string& name) const { return static_cast<std::int64_t>(state_.at(name).shape()[1]); }

  GraphBuilder g_;
  StateDict state_;
  std::set<std::string> stored_;  // the initializers made, by name
};

// ---- GPT-2 (models/gpt2.cpp) ----

std::string gpt2_activation(GraphBuilder& g, const std::string& x, const std::string& kind) {
  if (kind == "relu") return g.op("Relu", {x});
  const std::string half_x = g.op("Mul", {x, g.scalar(0.5f)});
  if (kind == "gelu") {  // x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
    const std::string e = g.op("Erf", {g.op("Mul", {x, g.scalar(static_cast<float>(1.0 / std::sqrt(2.0)))})});
    return g.op("Mul", {half_x, g.op("Add", {e, g.scalar(1.0f)})});
  }
  // gelu_new: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); opset 17 has no Gelu.
  const std::string cube = g.op("Mul", {g.op("Mul", {x, x}), x});
  const std::string inner = g.op("Add", {x, g.op("Mul", {cube, g.scalar(0.044715f)})});
  const float sqrt_2_over_pi = static_cast<float>(std::sqrt(2.0 / std::acos(-1.0)));
  const std::string t = g.op("Tanh", {g.op("Mul", {inner, g.scalar(sqrt_2_over_pi)})});
  return g.op("Mul", {half_x, g.op("Add", {t, g.scalar(1.0f)})});
}

std::string layer_norm(Exporter& e, const std::string& x, const std::string& name, double eps) {
  return e.g().op("LayerNormalization", {x, e.weight(name + ".weight"), e.weight(name + ".bias")},
                  {attribute("axis", std::int64_t{-1}), attribute("epsilon", static_cast<float>(eps))});
}

std::string gpt2_block(Exporter& e, const std::string& x, const std::string& p, const GPT2Config& c, const Inputs& in) {
  GraphBuilder& g = e.g();
  const auto width = static_cast<std::int64_t>(c.n_embd), heads = static_cast<std::int64_t>(c.n_head);
  g.set_scope(p + "attn");
  const std::string qkv = e.linear(layer_norm(e, x, p + "ln_1", c.layer_norm_epsilon), p + "attn.c_attn", true);
  const Names split = g.node("Split", {qkv}, 3, {attribute("axis", std::int64_t{-1})});  // q | k | v
  const auto no_rope = [](const std::string& v) { return v; };
  const std::string a = e.attention(split[0], split[1], split[2], heads, heads, width / heads, in, no_rope);
  const std::string y = g.op("Add", {x, e.linear(a, p + "attn.c_proj", true)});
  g.set_scope(p + "mlp");
  const std::string hidden = e.linear(layer_norm(e, y, p + "ln_2", c.layer_norm_epsilon), p + "mlp.c_fc", true);
  return g.op("Add", {y, e.linear(gpt2_activation(g, hidden, c.activation_function), p + "mlp.c_proj", true)});
}

void gpt2(Exporter& e, const GPT2Config& c) {
  GraphBuilder& g = e.g();
  const Inputs in = e.inputs("input_ids");
  g.set_scope("embeddings");
  const std::string tokens = g.op("Gather", {e.weight("transformer.wte.weight"), in.ids});           // [B, T, C]
  const std::string positions = g.op("Gather", {e.weight("transformer.wpe.weight"), in.positions});  // [T, C]
  std::string x = g.op("Add", {tokens, positions});
  for (std::size_t i = 0; i < c.n_layer; ++i) x = gpt2_block(e, x, "transformer.h." + std::to_string(i) + ".", c, in);
  g.set_scope("transformer.ln_f");
  const std::string h = layer_norm(e, x, "transformer.ln_f", c.layer_norm_epsilon);
  e.head(h, "transformer.wte.weight", c.tie_word_embeddings, in);
}

// ---- Llama (models/llama.cpp) ----

// x / sqrt(mean(x^2) + eps) * weight, in the order xgrad's kernel rounds it.
std::string rms_norm(Exporter& e, const std::string& x, const std::string& name, double eps) {
  GraphBuilder& g = e.g();
  const std::string mean_square =
      g.op("ReduceMean", {g.op("Mul", {x, x})}, {attribute("axes", Ints{-1}), attribute("keepdims", std::int64_t{1})});
  const std::string rms = g.op("Sqrt", {g.op("Add", {mean_square, g.scalar(static_cast<float>(eps))})});
  const std::string normed = g.op("Mul", {x, g.op("Reciprocal", {rms})});
  return g.op("Mul", {normed, e.weight(name + ".weight")});
}

// RoPE's cos and sin for the positions in use, [T, 1, 1, D / 2] (broadcasting over the
// heads of the attention's view), gathered from tables of every position the model takes,
// computed as xgrad's rope computes them (in double, rounded to float).
struct RopeTables {
  std::string cos, sin;
};

RopeTables rope_tables(Exporter& e, const LlamaConfig& c, const Inputs& in) {
  GraphBuilder& g = e.g();
  g.set_scope("rope");
  const std::size_t half = c.head_width() / 2, length = c.max_position_embeddings;
  const std::vector<double> inv_freq = scaled_rope_frequencies(c);
  std::vector<float> cos(length * half), sin(length * half);
  for (std::size_t t = 0; t < length; ++t)
    for (std::size_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * inv_freq[i];
      cos[t * half + i] = static_cast<float>(std::cos(angle));
      sin[t * half + i] = static_cast<float>(std::sin(angle));
    }
  const Ints dims{static_cast<std::int64_t>(length), static_cast<std::int64_t>(half)};
  const auto at_positions = [&](const std::string& table) {
    return g.op("Unsqueeze", {g.op("Gather", {table, in.positions}), g.ints({1, 2})});
  };
  return {at_positions(g.initializer("rope.cos", cos, dims)), at_positions(g.initializer("rope.sin", sin, dims))};
}

// Hugging Face's rotate-half: with x = [x1 | x2], [x1 cos - x2 sin | x2 cos + x1 sin].
std::string rotate_half(GraphBuilder& g, const std::string& x, const RopeTables& r) {
  const Names halves = g.node("Split", {x}, 2, {attribute("axis", std::int64_t{-1})});
  const std::string& x1 = halves[0];
  const std::string& x2 = halves[1];
  const std::string y1 = g.op("Sub", {g.op("Mul", {x1, r.cos}), g.op("Mul", {x2, r.sin})});
  const std::string y2 = g.op("Add", {g.op("Mul", {x2, r.cos}), g.op("Mul", {x1, r.sin})});
  return g.op("Concat", {y1, y2}, {attribute("axis", std::int64_t{-1})});
}

std::string llama_layer(Exporter& e, const std::string& x, const std::string& p, const LlamaConfig& c, const Inputs& in,
                        const RopeTables& rope) {
  GraphBuilder& g = e.g();
  g.set_scope(p + "self_attn");
  const std::string h = rms_norm(e, x, p + "input_layernorm", c.rms_norm_eps);
  const std::string q = e.linear(h, p + "self_attn.q_proj", false);
  const std::string k = e.linear(h, p + "self_attn.k_proj", false);
  const std::string v = e.linear(h, p + "self_attn.v_proj", false);
  const auto rotate = [&](const std::string& t) { return rotate_half(g, t, rope); };
  const std::string a =
      e.attention(q, k, v, static_cast<std::int64_t>(c.num_attention_heads), static_cast<std::int64_t>(c.kv_heads()),
                  static_cast<std::int64_t>(c.head_width()), in, rotate);
  const std::string y = g.op("Add", {x, e.linear(a, p + "self_attn.o_proj", false)});
  g.set_scope(p + "mlp");
  const std::string m = rms_norm(e, y, p + "post_attention_layernorm", c.rms_norm_eps);
  const std::string gate = e.linear(m, p + "mlp.gate_proj", false);
  const std::string silu = g.op("Mul", {gate, g.op("Sigmoid", {gate})});
  const std::string gated = g.op("Mul", {silu, e.linear(m, p + "mlp.up_proj", false)});
  return g.op("Add", {y, e.linear(gated, p + "mlp.down_proj", false)});
}

void llama(Exporter& e, const LlamaConfig& c) {
  GraphBuilder& g = e.g();
  const Inputs in = e.inputs("input_ids", c.sliding_window);
  const RopeTables rope = rope_tables(e, c, in);
  g.set_scope("embeddings");
  std::string x = g.op("Gather", {e.weight("model.embed_tokens.weight"), in.ids});
  for (std::size_t i = 0; i < c.num_hidden_layers; ++i)
    x = llama_layer(e, x, "model.layers." + std::to_string(i) + ".", c, in, rope);
  g.set_scope("model.norm");
  const std::string h = rms_norm(e, x, "model.norm", c.rms_norm_eps);
  e.head(h, "model.embed_tokens.weight", c.tie_word_embeddings, in);
}

// ---- the file ----

void set_tensor_type(onnx::ValueInfoProto& value, const std::string& name, onnx::TensorProto::DataType type,
                     const std::vector<std::variant<std::string, std::int64_t>>& dims) {
  value.set_name(name);
  onnx::TypeProto::Tensor& tensor = *value.mutable_type()->mutable_tensor_type();
  tensor.set_elem_type(type);
  for (const auto& d : dims) {
    onnx::TensorShapeProto::Dimension& dim = *tensor.mutable_shape()->add_dim();
    if (const auto* symbol = std::get_if<std::string>(&d))
      dim.set_dim_param(*symbol);
    else
      dim.set_dim_value(std::get<std::int64_t>(d));
  }
}

// The bytes of the weights as float32 (plus RoPE's tables): refused before anything is
// built when they alone pass protobuf's limit. In double: a config's positions may be
// any size (2^61 overflowed a size_t).
double weight_bytes(const PretrainedModel& model) {
  double elements = static_cast<double>(model.num_parameters());
  const ModelConfig config = model.config();
  if (const auto* llama = std::get_if<LlamaConfig>(&config))  // cos and sin, D / 2 each
    elements += static_cast<double>(llama->max_position_embeddings) * static_cast<double>(llama->head_width());
  return elements * sizeof(float);
}

// Streams protobuf's output into the writer; an exception from the writer is kept and
// rethrown after protobuf returns (it must not unwind through protobuf's code).
class WriterStream : public google::protobuf::io::CopyingOutputStream {
 public:
  explicit WriterStream(AtomicFileWriter& writer) : writer_(writer) {}
  bool Write(const void* buffer, int size) override {
    try {
      writer_.write({static_cast<const char*>(buffer), static_cast<std::size_t>(size)});
      return true;
    } catch (...) {
      error_ = std::current_exception();
      return false;
    }
  }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  AtomicFileWriter& writer_;
  std::exception_ptr error_;
};

}  // namespace

void save_onnx(const PretrainedModel& model, const std::string& path, const OnnxOptions& options) {
  for (const auto& [name, p] : model.named_parameters())
    XGRAD_CHECK(name.find(".lora_") == std::string::npos, kOp, "the model has LoRA adapters (", name,
                "): merge them first (nn::merge_lora)");
  constexpr std::size_t kLimit = INT_MAX;  // protobuf serializes no message of 2 GiB or more
  XGRAD_CHECK(weight_bytes(model) < kLimit, kOp, "the weights take ", weight_bytes(model),
              " bytes in float32 (RoPE's tables for max_position_embeddings included), past protobuf's 2 GiB limit "
              "on one ONNX file: ",
              path);
  std::error_code ec;
  XGRAD_CHECK(options.overwrite || !std::filesystem::exists(std::filesystem::symlink_status(path, ec)), kOp, "'", path,
              "' exists: set overwrite to replace it");
  // Opened first: a folder that cannot take the file fails before the graph is built.
  AtomicFileWriter writer(path, kOp);

  const ModelConfig config = model.config();
  onnx::ModelProto proto;
  proto.set_ir_version(kIrVersion);
  proto.set_producer_name("xgrad");
  proto.set_producer_version(version());
  onnx::OperatorSetIdProto& opset = *proto.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOpset);
  onnx::StringStringEntryProto& meta = *proto.add_metadata_props();
  meta.set_key("config.json");  // the family and sizes, as Hugging Face's file states them
  meta.set_value(model_config_json(config));

  onnx::GraphProto& graph = *proto.mutable_graph();
  graph.set_name(model.type_name());
  set_tensor_type(*graph.add_input(), "input_ids", onnx::TensorProto::INT64, {"batch", "sequence"});
  set_tensor_type(*graph.add_output(), "logits", onnx::TensorProto::FLOAT,
                  {"batch", "sequence", static_cast<std::int64_t>(model.vocab_size())});
  {
    Exporter exporter(model, graph);
    if (const auto* gpt2_config = std::get_if<GPT2Config>(&config))
      gpt2(exporter, *gpt2_config);
    else
      llama(exporter, std::get<LlamaConfig>(config));
  }
  XGRAD_CHECK(proto.ByteSizeLong() < kLimit, kOp, "the graph takes ", proto.ByteSizeLong(),
              " bytes, past protobuf's 2 GiB limit on one ONNX file: ", path);

  WriterStream stream(writer);
  {
    google::protobuf::io::CopyingOutputStreamAdaptor output(&stream);
    const bool written = proto.SerializeToZeroCopyStream(&output) && output.Flush();
    stream.rethrow();
    XGRAD_CHECK(written, kOp, "protobuf could not serialize the model: ", path);
  }
  writer.commit();
}

}  // namespace xgrad::models
