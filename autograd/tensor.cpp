#include "autograd/tensor.hpp"

#include <ostream>
#include <sstream>

#include <xtensor/xbuilder.hpp>

#include "autograd/random.hpp"
#include "autograd/record.hpp"

namespace xgrad {

const char* dtype_name(DType dtype) { return dtype == DType::float32 ? "float32" : "float64"; }

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::size_t numel(const Shape& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

void fail(const std::string& op, const std::string& message) { throw Error(op + ": " + message); }

void check_defined(const char* op, const Tensor& t) {
  if (!t.defined()) fail(op, "got an undefined tensor");
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a);
  check_defined(op, b);
  if (a.dtype() != b.dtype())
    fail(op, std::string("dtype mismatch: ") + dtype_name(a.dtype()) + " " + shape_str(a.shape()) +
                 " and " + dtype_name(b.dtype()) + " " + shape_str(b.shape()) +
                 " (convert one with .to())");
}

std::size_t normalize_axis(const char* op, int axis, std::size_t ndim, const Shape& shape) {
  const int n = static_cast<int>(ndim);
  if (axis < -n || axis >= n)
    fail(op, "axis " + std::to_string(axis) + " is out of range for shape " + shape_str(shape));
  return static_cast<std::size_t>(axis < 0 ? axis + n : axis);
}

Indices::Indices(std::vector<std::int64_t> ids, Shape shp) : values(std::move(ids)), shape(std::move(shp)) {
  if (xgrad::numel(shape) != values.size())
    fail("Indices", std::to_string(values.size()) + " values do not fill shape " + shape_str(shape));
}

// ---- Node -------------------------------------------------------------------------

Node::~Node() {
  // Freeing a long chain recursively would overflow the stack; unlink it iteratively:
  // a node we hold the last reference to gives up its inputs before it dies.
  std::vector<NodePtr> pending = std::move(inputs);
  while (!pending.empty()) {
    NodePtr node = std::move(pending.back());
    pending.pop_back();
    if (node && node.use_count() == 1) {
      for (NodePtr& input : node->inputs) pending.push_back(std::move(input));
      node->inputs.clear();
    }
  }
}

Shape Node::shape() const {
  return std::visit([](const auto& a) { return to_shape(a.shape()); }, *value);
}

// ---- Tensor -----------------------------------------------------------------------

Tensor::Tensor(std::shared_ptr<Node> node) : node_(std::move(node)) {}

namespace {

const Node& checked(const Tensor& t, const char* what) {
  if (!t.defined()) throw Error(std::string("Tensor::") + what + ": the tensor is undefined");
  return *t.node();
}

}  // namespace

Tensor Tensor::from_vector(const std::vector<double>& values, Shape shape, DType dtype,
                           bool requires_grad) {
  if (values.size() != xgrad::numel(shape))
    fail("Tensor::from_vector", std::to_string(values.size()) + " values do not fill shape " +
                                    shape_str(shape));
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

Shape Tensor::shape() const { return checked(*this, "shape").shape(); }
std::size_t Tensor::dim() const { return shape().size(); }
std::size_t Tensor::numel() const { return xgrad::numel(shape()); }
DType Tensor::dtype() const { return checked(*this, "dtype").dtype(); }

std::size_t Tensor::size(int axis) const {
  const Shape s = shape();
  return s[normalize_axis("Tensor::size", axis, s.size(), s)];
}

bool Tensor::requires_grad() const { return node_ && node_->requires_grad; }
bool Tensor::is_leaf() const { return checked(*this, "is_leaf").is_leaf(); }
const char* Tensor::op_name() const {
  const Node& n = checked(*this, "op_name");
  return n.op ? n.op : "";
}

Tensor& Tensor::requires_grad_(bool enabled) {
  const Node& n = checked(*this, "requires_grad_");
  if (!n.is_leaf())
    fail("Tensor::requires_grad_", std::string("only leaves can be marked; this tensor comes from '") +
                                       n.op + "' (use detach() first)");
  node_->requires_grad = enabled;
  return *this;
}

Tensor Tensor::grad() const {
  const Node& n = checked(*this, "grad");
  if (!n.grad) return Tensor();
  auto grad = std::make_shared<Node>();
  grad->value = n.grad;  // shared, not copied: later backward passes add into it
  return Tensor(std::move(grad));
}

void Tensor::zero_grad() {
  checked(*this, "zero_grad");
  node_->grad.reset();
}

Tensor Tensor::detach() const {
  auto node = std::make_shared<Node>();
  node->value = checked(*this, "detach").value;
  return Tensor(std::move(node));
}

Tensor Tensor::clone() const {
  return std::visit([](const auto& a) { return make_leaf(std::decay_t<decltype(a)>(a)); },
                    *checked(*this, "clone").value);
}

Tensor Tensor::to(DType target) const {
  const DType source = checked(*this, "to").dtype();
  if (source == target) return *this;
  return dispatch(target, [&](auto tag) {
    using T = decltype(tag);
    return std::visit(
        [&](const auto& a) {
          xt::xarray<T> out = xt::cast<T>(a);
          return record<T>("to", std::move(out), {*this}, [source](BackwardContext<T>& ctx) {
            dispatch(source, [&](auto source_tag) {
              using S = decltype(source_tag);
              accumulate_grad(ctx.input_node(0), Storage(xt::xarray<S>(xt::cast<S>(ctx.grad()))));
            });
          });
        },
        *node_->value);
  });
}

void Tensor::set_data(const Tensor& source) {
  Node& n = const_cast<Node&>(checked(*this, "set_data"));
  if (!n.is_leaf())
    fail("Tensor::set_data", std::string("only leaves can be overwritten; this tensor comes from '") + n.op + "'");
  n.value = std::make_shared<Storage>(*checked(source, "set_data").value);
  n.grad.reset();
}

double Tensor::item() const {
  const Node& n = checked(*this, "item");
  if (xgrad::numel(n.shape()) != 1)
    fail("Tensor::item", "needs a one-element tensor, got shape " + shape_str(n.shape()));
  return std::visit([](const auto& a) { return static_cast<double>(*a.data()); }, *n.value);
}

std::vector<double> Tensor::to_vector() const {
  return std::visit([](const auto& a) { return std::vector<double>(a.begin(), a.end()); },
                    *checked(*this, "to_vector").value);
}

template <class T>
T* Tensor::data() {
  Node& n = const_cast<Node&>(checked(*this, "data"));
  if (n.dtype() != dtype_of<T>())
    fail("Tensor::data", std::string("requested ") + dtype_name(dtype_of<T>()) + " from a " +
                             dtype_name(n.dtype()) + " tensor");
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
