#include "xgrad/nn/embedding.hpp"

#include <algorithm>
#include <cmath>

#include "xgrad/autograd/ops.hpp"
#include "xgrad/nn/init.hpp"

namespace xgrad::nn {

namespace {

// x + table[:L], with L read from x's position axis.
Tensor add_positions(const char* layer, const Tensor& x, const Tensor& table, bool batch_first) {
  const Shape shape = x.defined() ? x.shape() : Shape{};
  const std::size_t max_len = table.shape()[0], d = table.shape()[1];
  XGRAD_CHECK(shape.size() >= 2 && shape.back() == d && (batch_first || shape.size() == 3), layer, "input ", shape,
              " does not fit d_model ", d, (batch_first ? " (expected [..., L, d])" : " (expected [L, N, d])"));
  const std::size_t length = batch_first ? shape[shape.size() - 2] : shape[0];
  XGRAD_CHECK(length <= max_len, layer, "sequence length ", length, " of input ", shape, " exceeds max_len ", max_len);
  Tensor positions = slice(table, 0, 0, length);
  if (!batch_first) positions = unsqueeze(positions, 1);  // [L, 1, d] broadcasts over N
  return x + positions;
}

}  // namespace

Embedding::Embedding(std::size_t num, std::size_t dim, const EmbeddingOptions& embedding_options)
    : num_embeddings(num), embedding_dim(dim), options(embedding_options) {
  const auto signed_num = static_cast<std::int64_t>(num);
  if (options.padding_idx) {
    const std::int64_t padding = *options.padding_idx;
    XGRAD_CHECK(padding >= -signed_num && padding < signed_num, "Embedding", "padding_idx ", padding, " is outside [-",
                num, ", ", num, ") for ", num, " embeddings");
    if (padding < 0) options.padding_idx = padding + signed_num;
  }
  if (options.max_norm)
    XGRAD_CHECK(*options.max_norm >= 0.0 && std::isfinite(*options.max_norm), "Embedding",
                "max_norm must be finite and >= 0, got ", *options.max_norm);
  XGRAD_CHECK(options.norm_type > 0.0, "Embedding", "norm_type must be positive (or inf), got ", options.norm_type);
  weight = register_parameter("weight", init::zeros("Embedding", {num, dim}));
  init::normal_(weight, 0.0, 1.0);
  if (options.padding_idx) {  // as PyTorch's reset_parameters
    const std::size_t row = static_cast<std::size_t>(*options.padding_idx);
    dispatch(weight.dtype(), [&](auto tag) {
      using T = decltype(tag);
      std::fill_n(weight.data<T>() + row * dim, dim, T(0));
    });
  }
}

Tensor Embedding::forward(const Indices& ids) { return embedding(weight, ids, options); }

std::string Embedding::extra_repr() const {
  std::string repr = str(num_embeddings, ", ", embedding_dim);
  if (options.padding_idx) repr += str(", padding_idx=", *options.padding_idx);
  if (options.max_norm) repr += str(", max_norm=", *options.max_norm);
  if (options.norm_type != 2.0) repr += str(", norm_type=", options.norm_type);
  if (options.scale_grad_by_freq) repr += ", scale_grad_by_freq=true";
  return repr;
}

PositionalEncoding::PositionalEncoding(std::size_t d, std::size_t max_len, double dropout_p, bool batch_first)
    : d_model(d), max_len(max_len), batch_first(batch_first) {
  Tensor table = init::zeros("PositionalEncoding", {max_len, d}, DType::float64);
  double* values = table.data<double>();
  for (std::size_t pos = 0; pos < max_len; ++pos)
    for (std::size_t i = 0; i < d; i += 2) {
      const double angle =
          static_cast<double>(pos) * std::exp(-std::log(10000.0) * static_cast<double>(i) / static_cast<double>(d));
      values[pos * d + i] = std::sin(angle);
      if (i + 1 < d) values[pos * d + i + 1] = std::cos(angle);
    }
  pe = register_buffer("pe", table.to(DType::float32), /*persistent=*/false);
  dropout = register_module("dropout", std::make_shared<Dropout>(dropout_p));
}

Tensor PositionalEncoding::forward(const Tensor& x) {
  return dropout->forward(add_positions("PositionalEncoding", x, pe, batch_first));
}

std::string PositionalEncoding::extra_repr() const {
  return str("d_model=", d_model, ", max_len=", max_len, batch_first ? "" : ", batch_first=false");
}

LearnedPositionalEncoding::LearnedPositionalEncoding(std::size_t max_len, std::size_t d, bool batch_first)
    : max_len(max_len), d_model(d), batch_first(batch_first) {
  weight = register_parameter("weight", init::zeros("LearnedPositionalEncoding", {max_len, d}));
  init::normal_(weight, 0.0, 1.0);
}

Tensor LearnedPositionalEncoding::forward(const Tensor& x) {
  return add_positions("LearnedPositionalEncoding", x, weight, batch_first);
}

std::string LearnedPositionalEncoding::extra_repr() const {
  return str("max_len=", max_len, ", d_model=", d_model, batch_first ? "" : ", batch_first=false");
}

}  // namespace xgrad::nn
