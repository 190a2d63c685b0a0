#include "autograd/tensor.hpp"

#include <ostream>
#include <sstream>

#include <xtensor/xbuilder.hpp>

#include "autograd/node.hpp"
#include "autograd/random.hpp"

namespace xgrad {

const char* dtype_name(DType dtype) { return dtype == DType::float32 ? "float32" : "float64"; }

std::string shape_str(const Shape& shape) { return str(shape); }

std::size_t numel(const Shape& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

Indices::Indices(std::vector<std::int64_t> ids, Shape shp) : values(std::move(ids)), shape(std::move(shp)) {
  XGRAD_CHECK(xgrad::numel(shape) == values.size(), "Indices", values.size(), " values do not fill shape ", shape);
}

// ---- Tensor -----------------------------------------------------------------------

Tensor::Tensor(std::shared_ptr<Node> node) : node_(std::move(node)) {}

namespace {

const Node& checked(const Tensor& t, const char* op) {
  XGRAD_CHECK(t.defined(), op, "the tensor is undefined");
  return *t.node();
}

}  // namespace

Tensor Tensor::from_vector(const std::vector<double>& values, Shape shape, DType dtype, bool requires_grad) {
  XGRAD_CHECK(values.size() == xgrad::numel(shape), "Tensor::from_vector", values.size(), " values do not fill shape ",
              shape);
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> a = xt::xarray<T>::from_shape(to_xshape<T>(shape));
    std::copy(values.begin(), values.end(), a.begin());
    return make_leaf(std::move(a), requires_grad);
  });
}

Tensor Tensor::full(Shape shape, double value, DType dtype) {
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> a = xt::xarray<T>::from_shape(to_xshape<T>(shape));
    a.fill(static_cast<T>(value));
    return make_leaf(std::move(a));
  });
}

Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }
Tensor Tensor::zeros(Shape shape, DType dtype) { return full(std::move(shape), 0.0, dtype); }
Tensor Tensor::ones(Shape shape, DType dtype) { return full(std::move(shape), 1.0, dtype); }

Tensor Tensor::arange(std::size_t n, DType dtype) {
  std::vector<double> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<double>(i);
  return from_vector(values, {n}, dtype);
}

Tensor Tensor::randn(Shape shape, Generator& gen, DType dtype) {
  std::vector<double> values(xgrad::numel(shape));
  for (double& v : values) v = gen.normal();
  return from_vector(values, std::move(shape), dtype);
}

Tensor Tensor::uniform(Shape shape, double low, double high, Generator& gen, DType dtype) {
  std::vector<double> values(xgrad::numel(shape));
  for (double& v : values) v = gen.uniform(low, high);
  return from_vector(values, std::move(shape), dtype);
}

Shape Tensor::shape() const { return checked(*this, "Tensor::shape").shape(); }
std::size_t Tensor::dim() const { return shape().size(); }
std::size_t Tensor::numel() const { return xgrad::numel(shape()); }
DType Tensor::dtype() const { return checked(*this, "Tensor::dtype").dtype(); }

std::size_t Tensor::size(int axis) const {
  const Shape s = shape();
  return s[normalize_axis("Tensor::size", axis, s.size(), s)];
}

bool Tensor::requires_grad() const { return node_ && node_->requires_grad; }
bool Tensor::is_leaf() const { return checked(*this, "Tensor::is_leaf").is_leaf(); }
const char* Tensor::op_name() const {
  const Node& n = checked(*this, "Tensor::op_name");
  return n.op ? n.op : "";
}

Tensor& Tensor::requires_grad_(bool enabled) {
  const Node& n = checked(*this, "Tensor::requires_grad_");
  XGRAD_CHECK(n.is_leaf(), "Tensor::requires_grad_", "only leaves can be marked; this tensor comes from '", n.op,
              "' (use detach() first)");
  node_->requires_grad = enabled;
  return *this;
}

Tensor Tensor::grad() const {
  const Node& n = checked(*this, "Tensor::grad");
  if (!n.grad) return Tensor();
  auto grad = std::make_shared<Node>();
  grad->value = n.grad;  // shared, not copied: later backward passes add into it
  return Tensor(std::move(grad));
}

void Tensor::zero_grad() {
  checked(*this, "Tensor::zero_grad");
  node_->grad.reset();
}

Tensor Tensor::detach() const {
  auto node = std::make_shared<Node>();
  node->value = checked(*this, "Tensor::detach").value;
  return Tensor(std::move(node));
}

Tensor Tensor::clone() const {
  return std::visit([](const auto& a) { return make_leaf(std::decay_t<decltype(a)>(a)); },
                    *checked(*this, "Tensor::clone").value);
}

void Tensor::set_data(const Tensor& source) {
  Node& n = const_cast<Node&>(checked(*this, "Tensor::set_data"));
  XGRAD_CHECK(n.is_leaf(), "Tensor::set_data", "only leaves can be overwritten; this tensor comes from '", n.op, "'");
  n.value = std::make_shared<Storage>(*checked(source, "Tensor::set_data").value);
  n.grad.reset();
}

double Tensor::item() const {
  const Node& n = checked(*this, "Tensor::item");
  XGRAD_CHECK(xgrad::numel(n.shape()) == 1, "Tensor::item", "needs a one-element tensor, got shape ", n.shape());
  return std::visit([](const auto& a) { return static_cast<double>(*a.data()); }, *n.value);
}

std::vector<double> Tensor::to_vector() const {
  return std::visit([](const auto& a) { return std::vector<double>(a.begin(), a.end()); },
                    *checked(*this, "Tensor::to_vector").value);
}

template <class T>
T* Tensor::data() {
  Node& n = const_cast<Node&>(checked(*this, "Tensor::data"));
  XGRAD_CHECK(n.dtype() == dtype_of<T>(), "Tensor::data", "requested ", dtype_of<T>(), " from a ", n.dtype(),
              " tensor");
  return n.values<T>().data();
}

template <class T>
const T* Tensor::data() const {
  return const_cast<Tensor*>(this)->data<T>();
}

template float* Tensor::data<float>();
template double* Tensor::data<double>();
template const float* Tensor::data<float>() const;
template const double* Tensor::data<double>() const;

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  os << "Tensor(" << dtype_name(t.dtype()) << ' ' << shape_str(t.shape());
  if (t.requires_grad()) os << ", requires_grad";
  os << ") [";
  const std::vector<double> v = t.to_vector();
  const std::size_t shown = std::min<std::size_t>(v.size(), 8);
  for (std::size_t i = 0; i < shown; ++i) os << (i ? ", " : "") << v[i];
  if (shown < v.size()) os << ", ...";
  return os << ']';
}

}  // namespace xgrad
