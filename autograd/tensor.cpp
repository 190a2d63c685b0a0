#include "xgrad/autograd/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <new>
#include <ostream>
#include <sstream>
#include <utility>

#include <xtensor/xbuilder.hpp>

#include "xgrad/autograd/node.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/random.hpp"

namespace xgrad {

std::string shape_str(const Shape& shape) { return str(shape); }

std::size_t numel(const Shape& shape) {
  std::size_t n = 1;
  bool overflow = false;
  for (std::size_t d : shape) overflow = __builtin_mul_overflow(n, d, &n) || overflow;
  // Past 2^64 no element count is right; no shape that large could be allocated anyway.
  XGRAD_CHECK(!overflow || std::count(shape.begin(), shape.end(), 0) > 0, "shape", shape,
              " has more than 2^64 elements");
  return overflow ? 0 : n;
}

void Indices::check(std::string_view op) const {
  XGRAD_CHECK(xgrad::numel(shape) == values.size(), op, "ids hold ", values.size(), " values but their shape ", shape,
              " has ", xgrad::numel(shape));
}

Indices::Indices(std::vector<std::int64_t> ids, Shape shp) : values(std::move(ids)), shape(std::move(shp)) {
  XGRAD_CHECK(xgrad::numel(shape) == values.size(), "Indices", values.size(), " values do not fill shape ", shape);
}

void check_defined(std::string_view op, const Tensor& t) { XGRAD_CHECK(t.defined(), op, "got an undefined tensor"); }

void check_same_dtype(std::string_view op, const Tensor& a, const Tensor& b) {
  check_defined(op, a);
  check_defined(op, b);
  XGRAD_CHECK(a.dtype() == b.dtype(), op, "dtype mismatch: ", a.dtype(), " ", a.shape(), " and ", b.dtype(), " ",
              b.shape(), " (convert one with .to())");
}

// ---- Tensor -----------------------------------------------------------------------

Tensor::Tensor(std::shared_ptr<Node> node) : node_(std::move(node)) {}

namespace {

const Node& checked(const Tensor& t, const char* op) {
  XGRAD_CHECK(t.defined(), op, "the tensor is undefined");
  return *t.node();
}

// A leaf of `shape` whose elements are value() in order, converted to the dtype.
template <class Next>
Tensor generated(const char* op, const Shape& shape, DType dtype, Next&& value) {
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> a = new_array<T>(op, shape);
    for (T& element : a) element = static_cast<T>(value());
    return make_leaf(std::move(a));
  });
}

}  // namespace

Tensor Tensor::from_vector(const std::vector<double>& values, Shape shape, DType dtype, bool requires_grad) {
  XGRAD_CHECK(values.size() == xgrad::numel(shape), "Tensor::from_vector", values.size(), " values do not fill shape ",
              shape);
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> a = new_array<T>("Tensor::from_vector", shape);
    std::copy(values.begin(), values.end(), a.begin());
    return make_leaf(std::move(a), requires_grad);
  });
}

Tensor Tensor::full(Shape shape, double value, DType dtype) {
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> a = new_array<T>("Tensor::full", shape);
    a.fill(static_cast<T>(value));
    return make_leaf(std::move(a));
  });
}

Tensor Tensor::empty(Shape shape, DType dtype) {
  return dispatch(dtype, [&](auto tag) { return make_leaf(new_array<decltype(tag)>("Tensor::empty", shape)); });
}

Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }
Tensor Tensor::zeros(Shape shape, DType dtype) { return full(std::move(shape), 0.0, dtype); }
Tensor Tensor::ones(Shape shape, DType dtype) { return full(std::move(shape), 1.0, dtype); }

Tensor Tensor::arange(std::size_t n, DType dtype) {
  std::size_t i = 0;
  return generated("Tensor::arange", {n}, dtype, [&i] { return static_cast<double>(i++); });
}

Tensor Tensor::randn(Shape shape, Generator& gen, DType dtype) {
  return generated("Tensor::randn", shape, dtype, [&gen] { return gen.normal(); });
}

Tensor Tensor::normal(Shape shape, double mean, double std, Generator& gen, DType dtype) {
  XGRAD_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0, "Tensor::normal",
              "needs a finite mean and a finite std >= 0, got mean ", mean, " and std ", std, " for ", shape);
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T scale = static_cast<T>(std), shift = static_cast<T>(mean);
    xt::xarray<T> a = new_array<T>("Tensor::normal", shape);
    // Two roundings, as mul and add make them (the build contracts no products into FMAs).
    for (T& element : a) element = static_cast<T>(gen.normal()) * scale + shift;
    return make_leaf(std::move(a));
  });
}

Tensor Tensor::uniform(Shape shape, double low, double high, Generator& gen, DType dtype) {
  XGRAD_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high, "Tensor::uniform",
              "needs finite bounds low <= high, got [", low, ", ", high, ") for ", shape);
  return generated("Tensor::uniform", shape, dtype, [&] { return gen.uniform(low, high); });
}

Shape Tensor::shape() const { return checked(*this, "Tensor::shape").shape(); }
std::size_t Tensor::dim() const { return shape().size(); }
std::size_t Tensor::numel() const { return xgrad::numel(shape()); }
DType Tensor::dtype() const { return checked(*this, "Tensor::dtype").dtype(); }
Tensor Tensor::to(DType dtype) const { return cast(*this, dtype); }  // the one member that is an op

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

void Tensor::set_grad(const Tensor& gradient) {
  checked(*this, "Tensor::set_grad");
  checked(gradient, "Tensor::set_grad");
  XGRAD_CHECK(node_->is_leaf(), "Tensor::set_grad", "the tensor ", shape(), " is the output of '", node_->op,
              "', not a leaf");
  XGRAD_CHECK(gradient.shape() == shape() && gradient.dtype() == dtype(), "Tensor::set_grad", "a gradient ",
              gradient.shape(), " ", gradient.dtype(), " for a tensor ", shape(), " ", dtype());
  node_->grad = std::make_shared<Storage>(*gradient.node()->value);
}

std::size_t Tensor::add_grad_ready_hook(std::function<void(const Tensor& leaf)> hook) {
  checked(*this, "Tensor::add_grad_ready_hook");
  Node& n = *node_;
  XGRAD_CHECK(n.is_leaf(), "Tensor::add_grad_ready_hook", "the tensor ", shape(), " is the output of '", n.op,
              "', not a leaf: its gradient is not kept");
  XGRAD_CHECK(hook, "Tensor::add_grad_ready_hook", "the hook is empty");
  const std::size_t id = n.next_hook_id++;
  n.grad_ready_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_grad_ready_hook(std::size_t id) {
  checked(*this, "Tensor::remove_grad_ready_hook");
  Node& n = *node_;
  const auto it = std::find_if(n.grad_ready_hooks.begin(), n.grad_ready_hooks.end(),
                               [&](const auto& entry) { return entry.first == id; });
  XGRAD_CHECK(it != n.grad_ready_hooks.end(), "Tensor::remove_grad_ready_hook", "no hook ", id, " on this tensor");
  n.grad_ready_hooks.erase(it);
}

Tensor Tensor::detach() const {
  auto node = std::make_shared<Node>();
  node->value = checked(*this, "Tensor::detach").value;
  node->version = node_->version;  // a change through either handle is a change of both
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
  n.mark_modified();
  n.grad.reset();
}

void Tensor::set_data(Tensor&& source) {
  const Node& from = checked(source, "Tensor::set_data");
  if (source.node_.use_count() > 1 || from.value.use_count() > 1) return set_data(source);
  Node& n = const_cast<Node&>(checked(*this, "Tensor::set_data"));
  XGRAD_CHECK(n.is_leaf(), "Tensor::set_data", "only leaves can be overwritten; this tensor comes from '", n.op, "'");
  n.value = std::move(const_cast<Node&>(from).value);
  source = Tensor();
  n.mark_modified();
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
const T* Tensor::data() const {
  const Node& n = checked(*this, "Tensor::data");
  XGRAD_CHECK(n.dtype() == dtype_of<T>(), "Tensor::data", "requested ", dtype_of<T>(), " from a ", n.dtype(),
              " tensor");
  return n.values<T>().data();
}

template <class T>
T* Tensor::data() {
  const T* values = std::as_const(*this).data<T>();
  node_->mark_modified();  // the caller may write: ops recorded before must not use the new values
  return const_cast<T*>(values);
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
